"""A task's git workspace: plan.json and progress.md, and one commit per verified item."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from a2a_agent.errors import AgentError

KEY_TRAILER = "A2A-Idempotency-Key"
DERIVED_FILES = ("plan.json", "progress.md")


class WorkspaceError(AgentError):
    """A git operation in the workspace failed."""


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def command_pid_file(self) -> Path:
        """Where the running command's process group is noted (inside .git: never committed)."""
        return self.root / ".git" / "a2a-command.pid"

    async def _git(self, *args: str, check: bool = True, index: str | None = None) -> str:
        env = {
            "GIT_TERMINAL_PROMPT": "0",
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root),
            # The identity travels with every call, so a repository whose `git init` was cut
            # short by a crash (before any config was written) still commits.
            "GIT_AUTHOR_NAME": "a2a-agent",
            "GIT_AUTHOR_EMAIL": "a2a-agent@localhost",
            "GIT_COMMITTER_NAME": "a2a-agent",
            "GIT_COMMITTER_EMAIL": "a2a-agent@localhost",
            # Never fall through to a repository above the workspace (the home may sit inside
            # one) when the workspace's own is missing or broken.
            "GIT_CEILING_DIRECTORIES": str(self.root.parent),
        }
        if index is not None:
            env["GIT_INDEX_FILE"] = index
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=self.root,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await proc.communicate()
        if check and proc.returncode != 0:
            raise WorkspaceError(
                f"git {' '.join(args)} failed in {self.root}: {err.decode(errors='replace')}"
            )
        return out.decode(errors="replace").strip()

    def clear_stale_locks(self) -> None:
        """Remove git lock files a killed git process left behind.

        Only one step works in a workspace at a time, so any lock seen when a step starts
        belongs to a process that is gone.
        """
        git_dir = self.root / ".git"
        if git_dir.is_dir():
            for lock in git_dir.glob("*.lock"):
                lock.unlink(missing_ok=True)

    async def ensure(self) -> None:
        """Create the repository if it does not exist yet (safe to call on every step)."""
        self.root.mkdir(parents=True, exist_ok=True)
        git_dir = self.root / ".git"
        if git_dir.exists() and await self._git("rev-parse", "--git-dir", check=False) == "":
            # A `git init` killed half-way; nothing was committed in it yet (the checkpoint
            # check rebuilds a repository that had commits), so start it again.
            shutil.rmtree(git_dir)
        if not git_dir.exists():
            await self._git("init", "-q", "-b", "main")
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

    async def fingerprint(self) -> str:
        """The tree hash of the working directory, without the two files rendered from rows.

        A private index file keeps this from touching the index the commits use.
        """
        if not (self.root / ".git").exists():
            return "missing"
        index = str(self.root / ".git" / "a2a-fingerprint-index")
        await self._git(
            "add", "-A", "--", ".", *(f":(exclude){n}" for n in DERIVED_FILES), index=index
        )
        return await self._git("write-tree", index=index)

    async def bundle_since(self, previous: str | None) -> bytes:
        """A git bundle of HEAD, holding only the commits after `previous`."""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "checkpoint.bundle"
            spec = f"{previous}..main" if previous else "main"
            await self._git("bundle", "create", "-q", str(path), spec)
            return path.read_bytes()

    async def has_commit(self, sha: str) -> bool:
        if not (self.root / ".git").exists():
            return False
        out = await self._git("cat-file", "-t", sha, check=False)
        return out == "commit"

    async def restore(self, sha: str, bundles: list[bytes]) -> None:
        """Make the workspace exactly checkpoint `sha`, rebuilding the repository if lost."""
        if not await self.has_commit(sha):
            if self.root.exists():
                shutil.rmtree(self.root)
            await self.ensure()
            with tempfile.TemporaryDirectory() as tmp:
                for n, bundle in enumerate(bundles):
                    path = Path(tmp) / f"{n}.bundle"
                    path.write_bytes(bundle)
                    await self._git("fetch", "-q", str(path), "main:refs/a2a/restored")
        await self._git("reset", "-q", "--hard", sha)
        await self._git("clean", "-q", "-d", "-f", "-x", "-e", ".git")

    async def files_changed_since_start(self) -> list[str]:
        """Paths changed between the first commit and HEAD, without the rendered files."""
        if await self.head() is None:
            return []
        first = (await self._git("rev-list", "--max-parents=0", "HEAD")).split()[0]
        out = await self._git("diff", "--name-only", first, "HEAD")
        return [p for p in out.splitlines() if p and p not in DERIVED_FILES]
