"""How the harness's own git runs: its command line (`GIT`, `GIT_OPTIONS`), its environment
(`GIT_ENV`), the repository config the harness owns (`own_repository`), a bundle made from
a pack (`bundle_of`), and what is read from `.git` without a process (`read_head`, a loose
object).

A command can write anything in `.git`. Of that, what could make the harness's own git run
a program is the repository's config (filter drivers, `core.fsmonitor`, `diff.external`,
textconv, `core.sshCommand`, `core.pager`, `core.editor`, `credential.helper`, `gpg.program`,
aliases, `include.path`, `url.*.insteadOf`, `core.worktree`...), a `commondir` file that
sends git to another repository's config, `.git` itself replaced by a link or a gitfile, and
the hooks. So the harness owns the config: before each of its git calls `own_repository`
writes it back as `git init` made it (`REPOSITORY_CONFIG`, nothing a command added), removes
a `commondir` and a `.git` that is not a folder of its own, never following a link; the hooks
are off on the command line (`GIT_OPTIONS`), and nothing outside the repository is read
(`GIT_ENV`). One small compare (a write only when a command changed it), no process.
"""

from __future__ import annotations

import os
import shutil
import stat
import zlib
from pathlib import Path

from a2a_agent.harness.workspace.files import read_regular, remove_within_fd

GIT = shutil.which("git") or "git"
# Hooks a command may have planted never run inside the harness's git calls, and neither
# does a file-system monitor; no configuration outside the repository applies. No automatic
# gc after a commit: it costs a process per commit, and a task's history stays small. (Given
# on the command line, these reach every git that git itself starts, a nested repository's
# included.)
GIT_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
               "-c", "commit.gpgsign=false", "-c", "gc.auto=0",
               "-c", "maintenance.auto=false")  # fmt: skip
# The environment of every git the harness runs: no system or user config (nor the
# attributes and ignore files under $XDG_CONFIG_HOME, which is the workspace's `.config`
# when HOME is the workspace), no pager, editor or password program (an empty GIT_ASKPASS
# also keeps `core.askPass` from being asked), no prompt, and history as the commits say
# (no replace refs, no grafts file).
GIT_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "XDG_CONFIG_HOME": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_SEQUENCE_EDITOR": ":",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_GRAFT_FILE": "/dev/null/grafts",
    "GIT_AUTHOR_NAME": "a2a-agent",
    "GIT_AUTHOR_EMAIL": "a2a-agent@localhost",
    "GIT_COMMITTER_NAME": "a2a-agent",
    "GIT_COMMITTER_EMAIL": "a2a-agent@localhost",
}
# The repository's config as the harness owns it: what `git init` writes on Linux (checked
# by tests/test_git_planted.py), and nothing else. The harness keeps nothing of its own in it
# (a clone is fetched by URL, not as a remote; a push's credential helper is given on the
# command line), so nothing of the harness's is lost when it is written back.
REPOSITORY_CONFIG = (
    b"[core]\n"
    b"\trepositoryformatversion = 0\n"
    b"\tfilemode = true\n"
    b"\tbare = false\n"
    b"\tlogallrefupdates = true\n"
)
SMALL_FILE = 4096  # a ref
LARGE_FILE = 16 << 20  # packed refs, a loose object
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


PACK = ("pack-objects", "--revs", "--stdout", "--thin", "--delta-base-offset", "-q")


def bundle_of(pack: bytes, head: str, previous: str | None) -> bytes:
    """A git bundle (v2) of `head` on branch main whose pack holds the commits after
    `previous`, which a restore must already have (the bundle's prerequisite)."""
    prerequisite = f"-{previous}\n" if previous else ""
    return f"# v2 git bundle\n{prerequisite}{head} refs/heads/main\n\n".encode() + pack


def own_repository(root: Path) -> None:
    """Before each of the harness's git calls in `root`: the repository's config is the
    harness's own again, and nothing sends git to another repository. Walked from `root`'s
    descriptor, never through a link: a `.git` that is a link or a gitfile (`gitdir: ...`)
    is removed, so git finds no repository and fails (the next step's check restores the
    workspace from its checkpoints); a `.git/commondir` (git would read the config, refs and
    objects it names) is removed; `.git/config` is compared with `REPOSITORY_CONFIG` and
    written back if it differs, replaced if it is not a regular file of its own. Nothing to
    do where there is no repository yet (`git init` writes its own).

    No command of the workspace runs meanwhile: a command's box ends with it, and the harness
    calls git between commands, never beside one."""
    try:
        top = os.open(root, _DIRECTORY)
    except FileNotFoundError:
        return
    try:
        try:
            git_dir = os.open(".git", _DIRECTORY, dir_fd=top)
        except FileNotFoundError:
            return
        except OSError:  # a link (ELOOP) or a file (ENOTDIR): a repository elsewhere
            remove_within_fd(top, ".git")
            return
        try:
            remove_within_fd(git_dir, "commondir")
            _write_config(git_dir)
        finally:
            os.close(git_dir)
    finally:
        os.close(top)


def _write_config(git_dir: int) -> None:
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    want = REPOSITORY_CONFIG
    try:
        fd = os.open("config", flags, 0o644, dir_fd=git_dir)
    except OSError:  # a link (ELOOP), a FIFO (ENXIO), a folder (EISDIR): ours to replace
        remove_within_fd(git_dir, "config")
        fd = os.open("config", flags | os.O_EXCL, 0o644, dir_fd=git_dir)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:  # a hard link to elsewhere
            os.close(fd)
            fd = -1
            os.unlink("config", dir_fd=git_dir)
            fd = os.open("config", flags | os.O_EXCL, 0o644, dir_fd=git_dir)
        elif st.st_size == len(want) and os.pread(fd, len(want), 0) == want:
            return
        os.pwrite(fd, want, 0)
        os.ftruncate(fd, len(want))
    finally:
        if fd >= 0:
            os.close(fd)


def read_head(git_dir: Path) -> str | None:
    """The commit HEAD points at, read from `git_dir` without a process; None before the
    first commit."""
    raw = read_regular(git_dir / "HEAD", SMALL_FILE)
    if raw is None:
        return None
    head = raw.decode(errors="replace").strip()
    if not head.startswith("ref: "):
        return head if len(head) == 40 else None
    ref = head[5:].strip()
    if ".." in ref.split("/"):
        return None
    found = read_regular(git_dir / ref, SMALL_FILE)
    if found is not None:
        return found.decode(errors="replace").strip() or None
    packed_raw = read_regular(git_dir / "packed-refs", LARGE_FILE)
    if packed_raw is None:
        return None
    packed = packed_raw.decode(errors="replace")
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name.strip() == ref:
            return sha
    return None


def read_loose_object(git_dir: Path, sha: str) -> bytes | None:
    """A loose object's contents (header and body), None if it is not loose here."""
    raw = read_regular(git_dir / "objects" / sha[:2] / sha[2:], LARGE_FILE)
    if raw is None:
        return None
    try:
        return zlib.decompress(raw)
    except zlib.error:
        return None
