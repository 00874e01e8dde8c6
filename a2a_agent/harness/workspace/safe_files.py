"""The model's file tools, done so a path cannot trick them.

Paths are walked from the workspace one component at a time with `O_NOFOLLOW` (a symlink
anywhere on the way is refused, not followed), files are opened with `O_NONBLOCK` and
checked with `fstat` on the open descriptor (a FIFO, device or socket is refused, and opening
one cannot block), a file with more than one hard link is refused (it may be a file outside
the workspace under a name inside it), reads stop at the cap without loading the file, and
the harness's own files (`plan.json`, `progress.md`, anything in `.git`) are not written.
These are blocking calls: the tools run them in a thread, off the event loop.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

PROTECTED = ("plan.json", "progress.md")  # the harness renders them; top level only
MAX_EDIT_BYTES = 5_000_000


class UnsafePath(Exception):
    """A path or file the tools will not touch; the message says why."""


def parts_of(raw: str) -> list[str]:
    if not raw.strip():
        raise UnsafePath("path must be a non-empty string")
    if "\x00" in raw:
        raise UnsafePath("path contains a NUL character; no file has such a name")
    path = PurePosixPath(raw)
    if path.is_absolute():
        raise UnsafePath(f"{raw!r} is absolute; give a path relative to the workspace")
    parts = [p for p in path.parts if p not in ("", ".")]
    if ".." in parts:
        raise UnsafePath(f"{raw!r} climbs out with '..'; give a path inside the workspace")
    if ".git" in parts:
        raise UnsafePath("the .git directory is the harness's; leave it alone")
    if not parts:
        raise UnsafePath(f"{raw!r} is the workspace itself, not a file in it")
    return parts


@contextlib.contextmanager
def _fd(fd: int) -> Iterator[int]:
    try:
        yield fd
    finally:
        os.close(fd)


def _directory(root: Path, parts: list[str], raw: str, *, create: bool) -> int:
    """An open descriptor of the directory `parts` under `root`, no link followed."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for name in parts:
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o755, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise UnsafePath(f"{raw!r}: {name!r} is a link or not a directory") from exc
            if exc.errno == errno.ENOENT:
                raise UnsafePath(f"{raw!r} does not exist") from exc
            raise UnsafePath(f"{raw!r}: {exc.strerror}") from exc
        os.close(fd)
        fd = child
    return fd


def _open_file(root: Path, raw: str, flags: int, *, create_dirs: bool = False) -> int:
    parts = parts_of(raw)
    with _fd(_directory(root, parts[:-1], raw, create=create_dirs)) as parent:
        try:
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnsafePath(f"{raw!r} is a symbolic link; links are not followed") from exc
            if exc.errno == errno.ENOENT:
                raise UnsafePath(f"{raw!r} does not exist") from exc
            if exc.errno == errno.EISDIR:
                raise UnsafePath(f"{raw!r} is a directory") from exc
            if exc.errno == errno.ENXIO:  # a FIFO nobody reads, opened for writing
                raise UnsafePath(f"{raw!r} is not a regular file (a FIFO)") from exc
            raise UnsafePath(f"{raw!r}: {exc.strerror}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UnsafePath(f"{raw!r} is not a regular file (a FIFO, device, socket or directory)")
    if info.st_nlink > 1:
        os.close(fd)
        raise UnsafePath(f"{raw!r} has {info.st_nlink} hard links; such files are not touched")
    return fd


def read_capped(root: Path, raw: str, cap: int) -> tuple[bytes, bool]:
    """At most `cap` bytes of the file, and whether there was more."""
    with _fd(_open_file(root, raw, os.O_RDONLY)) as fd:
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


def write_all(root: Path, raw: str, content: bytes) -> None:
    if parts_of(raw) in ([name] for name in PROTECTED):
        raise UnsafePath(f"{raw!r} is the harness's own record; it is rewritten from the task")
    with _fd(_open_file(root, raw, os.O_WRONLY | os.O_CREAT, create_dirs=True)) as fd:
        os.ftruncate(fd, 0)
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]


def edit_once(root: Path, raw: str, old: str, new: str) -> None:
    data, more = read_capped(root, raw, MAX_EDIT_BYTES)
    if more:
        raise UnsafePath(f"{raw!r} is larger than {MAX_EDIT_BYTES} bytes; edit it with bash")
    text = data.decode("utf-8", errors="surrogateescape")
    count = text.count(old) if old else 0
    if count != 1:
        raise UnsafePath(f"old_string occurs {count} times in {raw}; it must occur exactly once")
    write_all(root, raw, text.replace(old, new, 1).encode("utf-8", errors="surrogateescape"))
