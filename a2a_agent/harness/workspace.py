"""A task's git workspace: plan.json and progress.md, and one commit per verified item."""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a_agent.errors import AgentError

KEY_TRAILER = "A2A-Idempotency-Key"


class WorkspaceError(AgentError):
    """A git operation in the workspace failed."""


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def _git(self, *args: str, check: bool = True) -> str:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=self.root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={
                "GIT_TERMINAL_PROMPT": "0",
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": str(self.root),
            },
        )
        out, err = await proc.communicate()
        if check and proc.returncode != 0:
            raise WorkspaceError(
                f"git {' '.join(args)} failed in {self.root}: {err.decode(errors='replace')}"
            )
        return out.decode(errors="replace").strip()

    async def ensure(self) -> None:
        """Create the repository if it does not exist yet (safe to call on every step)."""
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.root / ".git").exists():
            await self._git("init", "-q", "-b", "main")
            await self._git("config", "user.name", "a2a-agent")
            await self._git("config", "user.email", "a2a-agent@localhost")
            await self._git("config", "commit.gpgsign", "false")

    def write_files(self, plan_json: str, progress_md: str) -> None:
        for name, text in (("plan.json", plan_json), ("progress.md", progress_md)):
            tmp = self.root / f".{name}.tmp"
            tmp.write_text(text)
            tmp.replace(self.root / name)

    async def head(self) -> str | None:
        out = await self._git("rev-parse", "--verify", "-q", "HEAD", check=False)
        return out or None

    async def commit(self, message: str, key: str) -> str:
        """Commit everything; a commit already made under `key` is returned, not repeated."""
        if await self.head() is not None:
            last = await self._git("log", "-1", "--format=%B")
            if f"{KEY_TRAILER}: {key}" in last:
                return await self._git("rev-parse", "HEAD")
        await self._git("add", "-A")
        await self._git("commit", "-q", "--allow-empty", "-m", f"{message}\n\n{KEY_TRAILER}: {key}")
        return await self._git("rev-parse", "HEAD")

    async def log(self) -> list[str]:
        if await self.head() is None:
            return []
        return (await self._git("log", "--format=%H %s")).splitlines()
