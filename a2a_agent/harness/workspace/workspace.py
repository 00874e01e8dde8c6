"""A task's git workspace: plan.json and progress.md, and one commit per verified item.

Git runs as a child process only where it must (`git add -A`: one per verified item, in its
box); what can be read from `.git` directly (HEAD, a loose commit, the index, made into the
commit by `commits.py`, the objects the commit wrote, packed for its bundle by `packs.py`) is
read and written here, and the fingerprint is a walk of the tree's metadata, without a
process. How git itself runs (its options, its environment, the repository config the
harness owns) is `git.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

from a2a_agent.errors import AgentError
from a2a_agent.harness.workspace.commits import COMMIT_SCRIPT, commit_index
from a2a_agent.harness.workspace.files import (
    fresh_directory_within,
    overwrite,
    overwrite_within,
)
from a2a_agent.harness.workspace.fingerprints import tree_fingerprint
from a2a_agent.harness.workspace.git import (
    GIT,
    GIT_ENV,
    GIT_OPTIONS,
    PACK,
    REPOSITORY_CONFIG,
    bundle_of,
    own_repository,
    read_head,
    read_loose_object,
)
from a2a_agent.harness.workspace.packs import is_loose_line, pack_since
from a2a_agent.harness.workspace.sandbox import Sandbox

KEY_TRAILER = "A2A-Idempotency-Key"
DEFAULT_GITIGNORE = """\
# Written by a2a-agent when the task began (the workspace had no .gitignore of its own).
__pycache__/
*.py[cod]
.pytest_cache/
.mypy_cache/
.ruff_cache/
.venv/
venv/
node_modules/
dist/
build/
*.egg-info/
.coverage
.DS_Store
"""
DERIVED_FILES = ("plan.json", "progress.md")
PID_DIR = ".commands"  # beside the workspaces: out of every box
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_FINGERPRINTED = frozenset({".git", *DERIVED_FILES})
# An index up to this size is read and committed on the event loop (about 0.1 ms a hundred
# entries); a larger one in a thread.
INLINE_INDEX_BYTES = 64 * 1024


class WorkspaceError(AgentError):
    """A git operation in the workspace failed."""


class Workspace:
    def __init__(
        self, root: Path, *, git_timeout_s: float = 600.0, sandbox: Sandbox | None = None
    ) -> None:
        self.root = root
        self.git_timeout_s = git_timeout_s
        # Git reads the repository's own config and .gitattributes, which a command can
        # write (a filter driver is a command git runs): so the harness's git runs in the
        # task's box too.
        self.sandbox = sandbox

    @property
    def git_dir(self) -> Path:
        return self.root / ".git"

    @property
    def command_pid_file(self) -> Path:
        """Where the running command's process group is noted: beside the workspaces, not in
        one, since a command could write there the group of any process for the harness to
        kill."""
        return self.lane_pid_file(0)

    def lane_pid_file(self, lane: int) -> Path:
        """The pid file of commands run side by side (re-verification's lanes; 0: the one)."""
        name = self.root.name if lane == 0 else f"{self.root.name}.{lane}"
        return self.root.parent / PID_DIR / f"{name}.pid"

    def pid_files(self) -> list[Path]:
        """Every lane's pid file there is (what a dead incarnation may have left running)."""
        found = self.root.parent / PID_DIR
        try:
            names = os.listdir(found)
        except FileNotFoundError:
            return []
        mine = self.root.name + "."
        return sorted(found / n for n in names if n.startswith(mine) and n.endswith(".pid"))

    def _env(self) -> dict[str, str]:
        # The identity travels with every call (GIT_ENV), so a repository whose `git init` was
        # cut short by a crash (before any config was written) still commits.
        return GIT_ENV | {
            "HOME": str(self.root),
            # Never fall through to a repository above the workspace (the home may sit inside
            # one) when the workspace's own is missing or broken.
            "GIT_CEILING_DIRECTORIES": str(self.root.parent),
            # The workspace's git reaches nothing but local files (a checkpoint's bundle).
            "GIT_ALLOW_PROTOCOL": "file",
        }

    async def _run(
        self, *argv: str, check: bool = True, stdin: bytes | None = None, what: str = "commit"
    ) -> bytes:
        """Run git (or the commit script) in the workspace, killed after the timeout, on the
        repository's own config (`own_repository`)."""
        own_repository(self.root)
        boxed = self.sandbox.wrap(argv, self.root) if self.sandbox is not None else list(argv)
        proc = await asyncio.create_subprocess_exec(
            *boxed,
            cwd=self.root,
            stdin=asyncio.subprocess.DEVNULL if stdin is None else asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._env(),
        )
        what = argv[1] if argv[0] == GIT else what
        try:
            out, err = await asyncio.wait_for(proc.communicate(stdin), self.git_timeout_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            raise WorkspaceError(
                f"git {what} did not finish within {self.git_timeout_s:g} s in {self.root}"
            ) from None
        if check and proc.returncode != 0:
            raise WorkspaceError(
                f"git {what} failed in {self.root}: {err.decode(errors='replace').strip()}"
            )
        return out

    async def _git_bytes(self, *args: str, check: bool = True, stdin: bytes | None = None) -> bytes:
        return await self._run(GIT, *GIT_OPTIONS, *args, check=check, stdin=stdin)

    async def _git(self, *args: str, check: bool = True) -> str:
        return (await self._git_bytes(*args, check=check)).decode(errors="replace").strip()

    def clear_stale_locks(self) -> None:
        """Remove git lock files a killed git process left behind.

        Only one step works in a workspace at a time, so any lock seen when a step starts,
        or when it commits after its commands ended, belongs to a process that is gone.
        """
        try:
            git_dir = os.open(self.git_dir, _DIRECTORY)  # never through a planted link
        except OSError:
            return
        try:
            for name in os.listdir(git_dir):
                if name.endswith(".lock"):
                    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                        os.unlink(name, dir_fd=git_dir)
        finally:
            os.close(git_dir)

    async def ensure(self) -> None:
        """Create the repository if it does not exist yet (safe to call again)."""
        self.root.mkdir(parents=True, exist_ok=True)
        complete = all((self.git_dir / part).exists() for part in ("HEAD", "objects", "refs"))
        if self.git_dir.exists() and not complete:
            # A `git init` killed half-way; nothing was committed in it yet (the checkpoint
            # check rebuilds a repository that had commits), so start it again.
            shutil.rmtree(self.git_dir)
        if not self.git_dir.exists():
            self._init_repository()

    def _init_repository(self) -> None:
        """What `git init -b main` makes that git needs, written here rather than by git in
        a box (a box costs about 5 ms of the machine's CPU, most of it the kernel's): the
        directories, the harness's config, then HEAD, whose absence `ensure` takes for an
        init cut short. Nothing has run in the workspace yet; an existing `.git` (a link
        included) is refused by the first mkdir, never followed."""
        os.mkdir(self.git_dir)
        for part in ("objects/info", "objects/pack", "refs/heads", "refs/tags", "info", "hooks"):
            os.makedirs(self.git_dir / part)
        for name, body in (("config", REPOSITORY_CONFIG), ("HEAD", b"ref: refs/heads/main\n")):
            fd = os.open(self.git_dir / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
            with os.fdopen(fd, "wb") as file:
                file.write(body)

    def ignore_build_junk(self, *, local: bool = False) -> None:
        """A .gitignore for what builds and tests leave behind, unless the workspace has its
        own: the report's files_changed then lists what the work changed. `local`: the
        caller's repository, which gets no file of ours; git's own exclude list instead."""
        path = self.root / ".gitignore"
        if local:
            overwrite_within(self.root, ".git/info/exclude", DEFAULT_GITIGNORE)
        elif not path.exists() and not path.is_symlink():
            path.write_text(DEFAULT_GITIGNORE)

    def write_files(self, plan_json: str, progress_md: str) -> None:
        """Write the two files rendered from rows; a lost workspace gets them again when it is
        restored (the next step's check), so they are not written into nothing."""
        if not self.git_dir.is_dir():
            return
        for name, text in (("plan.json", plan_json), ("progress.md", progress_md)):
            overwrite(self.root / name, text)

    # ---- reading .git without a process ---------------------------------------------

    def head(self) -> str | None:
        """The commit HEAD points at, read from .git; None before the first commit."""
        return read_head(self.git_dir)

    def _loose_object(self, sha: str) -> bytes | None:
        return read_loose_object(self.git_dir, sha)

    async def _head_message(self, sha: str) -> str:
        raw = self._loose_object(sha)
        if raw is not None and raw.startswith(b"commit "):
            _, _, body = raw.partition(b"\x00")
            _, _, message = body.partition(b"\n\n")
            return message.decode(errors="replace")
        return await self._git("log", "-1", "--format=%B", sha)

    async def has_commit(self, sha: str) -> bool:
        if not self.git_dir.exists():
            return False
        if self.head() == sha or self._loose_object(sha) is not None:
            return True
        return await self._git("cat-file", "-t", sha, check=False) == "commit"

    # ---- writing ------------------------------------------------------------------------

    async def commit(
        self, message: str, key: str, previous: str | None
    ) -> tuple[str, bytes | None]:
        """Commit everything and bundle the commits after checkpoint `previous`: the new
        checkpoint's sha and bundle (None if HEAD is still `previous`). A commit already made
        under `key` is not repeated.

        `git add -A` runs in the box, and the commit is made here from the index
        (`commits.py`) and its bundle's pack from the loose objects (`packs.py`). Where
        either cannot be (an index or history this does not read with certainty), git
        makes it. With a read script (`commit_then_read`) or after a command's merge, add,
        commit and (for a merge) pack run in one shell in one box.
        """
        sha, bundle, _ = await self.commit_then_read(message, key, previous, ())
        return sha, bundle

    async def commit_then_read(
        self, message: str, key: str, previous: str | None, read: tuple[str, ...]
    ) -> tuple[str, bytes | None, bytes | None]:
        """`commit`, then `read` (a script that only reads and its arguments, as
        `read_script` takes them; none: nothing) in the same box, on the repository as the
        commit left it: also what the script printed. That is None when the commit had been
        made before under `key` (a step run again after a crash): read it on its own then."""
        head = self.head()
        if head is not None and f"{KEY_TRAILER}: {key}" in await self._head_message(head):
            if head == previous:
                return head, None, None
            return head, bundle_of(await self.pack(head, previous), head, previous), None
        text = f"{message}\n\n{KEY_TRAILER}: {key}\n"
        # The pack is written here when the commits after `previous` (a command's own, then
        # this one) will be a line of loose commits (`packs.py`); else git writes it in the
        # same box.
        if previous is None:
            ours = head is None  # a first commit; a history without a checkpoint: git's pack
        else:
            ours = self._loose_object(previous) is not None and (
                head == previous
                or (head is not None and is_loose_line(self.git_dir, head, previous))
            )
        printed: bytes | None = None
        if ours and not read:
            head = await self._commit_here(text)
        else:
            head, pack, printed = await self._commit_in_box(text, previous, read, ours)
            if not ours:
                return head, bundle_of(pack, head, previous), printed
        return head, bundle_of(await self.pack(head, previous), head, previous), printed

    async def pack(self, head: str, previous: str | None) -> bytes:
        """The pack of the commits after `previous` (None: all) up to `head`: written here
        from loose objects (`packs.py`) where it can be, else by git."""
        made = pack_since(self.git_dir, head, previous)
        if made is None:  # a merge, an object git did not leave loose, a large change
            revs = f"{head}\n" + (f"^{previous}\n" if previous else "")
            made = await self._git_bytes(*PACK, stdin=revs.encode())
        return made

    async def _commit_here(self, text: str) -> str:
        """`git add -A` in the box, then the commit made here from the index (`commits.py`);
        by `git commit` in a box of its own where that cannot be."""
        await self._git("add", "-A")
        index = self.git_dir / "index"
        with contextlib.suppress(OSError):
            if index.stat().st_size > INLINE_INDEX_BYTES:  # a large tree: off the event loop
                made = await asyncio.to_thread(commit_index, self.root, text)
            else:
                made = commit_index(self.root, text)
            if made is not None:
                return made
        overwrite_within(self.root, ".git/A2A_COMMIT_MSG", text)
        await self._git("commit", "-q", "--allow-empty", "--no-verify", "-F",
                        str(self.git_dir / "A2A_COMMIT_MSG"))  # fmt: skip
        return self.head() or await self._git("rev-parse", "HEAD")

    async def _commit_in_box(
        self, text: str, previous: str | None, read: tuple[str, ...], ours: bool
    ) -> tuple[str, bytes, bytes | None]:
        """`COMMIT_SCRIPT`: add and commit in one box, the pack too unless `ours`, then `read`:
        the new head, the pack (empty if `ours`) and what `read` printed."""
        overwrite_within(self.root, ".git/A2A_COMMIT_MSG", text)
        out = await self._run(
            "/bin/sh", "-c", COMMIT_SCRIPT, "commit", str(self.git_dir / "A2A_COMMIT_MSG"),
            previous or "", "" if ours else "pack", *(read or ("",)),
        )  # fmt: skip
        pack, printed = out, None
        if read:
            size, _, rest = out.partition(b"\n")
            if not size.strip().isdigit() or len(rest) < int(size):
                raise WorkspaceError(f"the commit's pack did not come whole in {self.root}")
            pack, printed = rest[: int(size)], rest[int(size) :]
        return self.head() or await self._git("rev-parse", "HEAD"), pack, printed

    async def fingerprint(self) -> str:
        """What the working tree is, for telling whether anything changed it between steps
        (`fingerprints.py`): its paths' metadata, without the two files rendered from rows,
        plus HEAD."""
        if not self.git_dir.exists():
            return "missing"
        return await tree_fingerprint(self.root, self.head(), skip_top=_NOT_FINGERPRINTED)

    async def restore(
        self,
        sha: str,
        bundles: list[bytes],
        base: Callable[[Workspace], Awaitable[None]] | None = None,
    ) -> None:
        """Make the workspace exactly checkpoint `sha`, rebuilding the repository if lost
        (`base` first brings what the bundles build on: a cloned repository's start)."""
        if not await self.has_commit(sha):
            if self.root.exists():
                shutil.rmtree(self.root)
            await self.ensure()
            if base is not None:
                await base(self)
            # Inside .git, where the boxed git can read them (and a command cannot be in the
            # middle of its step: the workspace is being rebuilt).
            for n, bundle in enumerate(bundles):
                path = self.git_dir / f"a2a-restore-{n}.bundle"
                path.write_bytes(bundle)
                try:
                    await self._git(
                        "fetch", "-q", "--no-recurse-submodules", str(path),
                        "main:refs/a2a/restored",
                    )  # fmt: skip
                finally:
                    path.unlink(missing_ok=True)
        await self._git("reset", "-q", "--hard", sha)
        await self._git("clean", "-q", "-d", "-f", "-x", "-e", ".git")

    async def export(self, sha: str, dest: Path) -> None:
        """The tree of commit `sha` as plain files in `dest`, a fresh directory inside `.git`
        (where the boxed git can write, and no step of the run looks)."""
        inside = dest.relative_to(self.root).as_posix()
        await asyncio.to_thread(fresh_directory_within, self.root, inside)
        await self._run(
            "/bin/bash",
            "-c",
            "set -eo pipefail; sha=$1 dest=$2 git=$3; shift 3; "
            '"$git" "$@" archive --format=tar "$sha" | tar -x -C "$dest"',
            "export",
            sha,
            str(dest),
            GIT,
            *GIT_OPTIONS,
        )

    async def commits_after(self, base: str, head: str) -> list[str] | None:
        """The commits after `base` up to `head`, oldest first, along the first parents;
        None if `base` is not in `head`'s history."""
        line = (await self._git("rev-list", "--first-parent", head)).split()
        if base not in line:
            return None
        return list(reversed(line[: line.index(base)]))

    async def commit_key(self, sha: str) -> str | None:
        """The idempotency key a commit was made under (its trailer), if the harness made it."""
        for line in (await self._head_message(sha)).splitlines():
            if line.startswith(f"{KEY_TRAILER}: "):
                return line.split(": ", 1)[1].strip()
        return None

    async def apply_patch(self, patch: bytes) -> str | None:
        """Apply a diff to the working tree (in the box): None, or why it did not apply."""
        try:
            await self._git_bytes("apply", "--whitespace=nowarn", "-", stdin=patch)
        except WorkspaceError as exc:
            return str(exc)[-500:]
        return None

    async def read_git(self, *args: str, stdin: bytes | None = None) -> bytes:
        """The output of a git command that only reads (boxed like every other)."""
        return await self._git_bytes(*args, stdin=stdin)

    async def read_script(self, script: str, *args: str) -> bytes:
        """The output of a harness shell script (`sh -c script name args... git options...`)
        that runs several git commands that only read, in one box: a box costs about 5 ms of
        the machine's CPU (its namespaces and mounts), most of it the kernel's."""
        return await self._run(
            "/bin/sh", "-c", script, "script", *args, GIT, *GIT_OPTIONS, what="script"
        )
