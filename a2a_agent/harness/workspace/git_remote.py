"""Git across the workspace's edge: fetching a caller's repository into a fresh one, and
pushing a task's commits to a caller's branch.

Each call runs boxed like the harness's other git (the network on, only the repository
written, plus a local target a push writes to), on the repository's config as the harness
owns it (`own_repository`: whatever a command wrote there, a helper, an `insteadOf`, a
`core.sshCommand`, is gone), with no configuration from outside the repository, no hooks, no
redirects, only the https, http and file protocols, and no prompt: a credential the task
names is handed to git by a helper that reads it from the environment of that one call, so
it never reaches a URL, a log or the workspace.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

from a2a_agent.errors import AgentError, PlanError
from a2a_agent.harness.workspace.git import GIT, GIT_ENV, GIT_OPTIONS, own_repository
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.sources import SourceRules, local_path

# Reads the credential from this call's environment (git asks the helper; nothing is stored).
CREDENTIAL_HELPER = (
    '!f() { test "$1" = get || exit 0; echo "username=$A2A_GIT_USERNAME"; '
    'echo "password=$A2A_GIT_PASSWORD"; }; f'
)
ERROR_TAIL = 1500


class RemoteError(AgentError):
    """A fetch or push failed; the message says what git said."""


@dataclass(frozen=True)
class Pushed:
    result: str  # pushed | already | diverged (not a fast-forward: nothing pushed)
    commit: str
    before: str | None  # what the branch held before
    detail: str = ""


@dataclass(frozen=True)
class GitRemote:
    rules: SourceRules
    sandbox: Sandbox
    timeout_s: float = 3600.0

    def _env(self, credential: str | None) -> dict[str, str]:
        env = GIT_ENV | {"GIT_ALLOW_PROTOCOL": "https:http:file"}
        if credential is not None:
            secret = self.rules.credentials[credential]
            env |= {"A2A_GIT_USERNAME": secret.username, "A2A_GIT_PASSWORD": secret.password}
        return env

    async def _git(
        self,
        repo: Path,
        *args: str,
        credential: str | None = None,
        writable: tuple[Path, ...] = (),
        url: str | None = None,
        check: bool = True,
    ) -> tuple[int, str]:
        """Run git in `repo`, boxed, with the network (and `url`'s directory when it is a
        local repository: read-only, unless it is `writable`); (exit code, output)."""
        options = [*GIT_OPTIONS, "-c", "http.followRedirects=false", "-c", "credential.helper="]
        if credential is not None:
            options += ["-c", f"credential.helper={CREDENTIAL_HELPER}"]
        local = local_path(url) if url else None
        own_repository(repo)
        readable = (Path(local),) if local and Path(local) not in writable else ()
        argv = self.sandbox.wrap(
            [GIT, *options, *args], repo, network=True, writable=writable, readable=readable
        )
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=repo,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=self._env(credential),
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise RemoteError(f"git {args[0]} did not finish within {self.timeout_s:g} s") from None
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        text = out.decode(errors="replace").strip()
        code = proc.returncode if proc.returncode is not None else -1
        if check and code != 0:
            raise RemoteError(f"git {args[0]} failed ({code}): {text[-ERROR_TAIL:]}")
        return code, text

    async def _checked(self, url: str, where: str) -> None:
        try:
            await self.rules.check_url(url, where)
        except PlanError as exc:
            raise RemoteError(str(exc)) from None

    async def fetch_into(
        self, repo: Path, url: str, ref: str, *, depth: int | None, credential: str | None
    ) -> str:
        """A fresh repository in `repo` (an empty directory) on branch main at `ref` of `url`;
        the commit it holds."""
        await self._checked(url, "the source")
        await self._git(repo, "init", "-q", "-b", "main", ".")
        fetch = ["fetch", "-q", "--no-tags", "--no-recurse-submodules"]
        if depth is not None:
            fetch.append(f"--depth={depth}")
        await self._git(repo, *fetch, "--", url, ref, credential=credential, url=url)
        await self._git(repo, "checkout", "-q", "-B", "main", "FETCH_HEAD")
        _, sha = await self._git(repo, "rev-parse", "HEAD")
        return sha

    async def fetch_commit(
        self, repo: Path, url: str, commit: str, *, credential: str | None
    ) -> None:
        """Bring commit `commit` of `url` into `repo` (what a restore builds on)."""
        await self._checked(url, "the source")
        await self._git(
            repo, "fetch", "-q", "--no-tags", "--depth=1", "--", url, commit,
            credential=credential, url=url,
        )  # fmt: skip

    async def branch_head(
        self, repo: Path, url: str, branch: str, *, credential: str | None
    ) -> str | None:
        _, out = await self._git(
            repo, "ls-remote", "--heads", "--", url, f"refs/heads/{branch}",
            credential=credential, url=url,
        )  # fmt: skip
        for line in out.splitlines():
            sha, _, name = line.partition("\t")
            if name == f"refs/heads/{branch}":
                return sha
        return None

    async def push(
        self, repo: Path, url: str, branch: str, commit: str, *, credential: str | None
    ) -> Pushed:
        """Push `commit` to `branch`, never forced: done once (a second push of the same
        commit finds it there), and a branch that moved elsewhere is reported, not
        overwritten."""
        await self._checked(url, "publish.git")
        before = await self.branch_head(repo, url, branch, credential=credential)
        if before == commit:
            return Pushed("already", commit, before, "the branch already holds these commits")
        target = local_path(url)
        code, out = await self._git(
            repo,
            "push",
            "--porcelain",
            "--",
            url,
            f"{commit}:refs/heads/{branch}",
            credential=credential,
            writable=(Path(target),) if target else (),
            url=url,
            check=False,
        )
        if code == 0:
            return Pushed("pushed", commit, before, out[-ERROR_TAIL:])
        if "[rejected]" in out or "non-fast-forward" in out or "fetch first" in out:
            return Pushed(
                "diverged",
                commit,
                before,
                f"the branch {branch} has moved on (it holds {str(before)[:12]}, which is not "
                "in this task's history): not a fast-forward, so nothing was pushed and "
                "nothing forced",
            )
        raise RemoteError(f"git push failed ({code}): {out[-ERROR_TAIL:]}")
