"""Small files the harness rewrites at every step, written without a flush.

On ext4, truncating a file to zero or renaming over it makes the kernel allocate and flush
its blocks at close (`auto_da_alloc`): 0.28 ms per write, measured here. Writing over the old
bytes and then cutting the file to its new length costs 0.01 ms. Every file written this way
is derived or advisory (plan.json and progress.md are rendered again at every step, a torn
marker reads as none), so a crash in the middle of a write loses nothing.

A command may have left a link where such a file goes: the path is never followed, and a
file that is not a regular file of its own (a hard link to something else, a FIFO) is
replaced. What the harness reads from `.git` is read the same careful way (`read_regular`).
Folders the harness keeps in a workspace (`answers/`, `delegated/`, `.git/a2a-probe/`) are
walked one level at a time from the workspace's own descriptor (`overwrite_within`,
`fresh_directory_within`): a command that put a link there (`answers -> /etc`) gets it
replaced by a folder, and the harness, which runs outside the sandbox, never writes or
deletes through it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path

_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def overwrite(path: Path, text: str) -> None:
    """`text` as the file at `path` (its folder trusted; the file itself never a link)."""
    folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _overwrite_at(folder, path.name, text.encode())
    finally:
        os.close(folder)


def _overwrite_at(folder: int, name: str, data: bytes) -> None:
    """Write over the old bytes of `name` in `folder`, then cut it to length; whatever is
    there that is not a regular file of its own (a link, a FIFO, a hard link) is replaced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, 0o644, dir_fd=folder)
    except OSError:  # a symbolic link (ELOOP), a FIFO nobody reads (ENXIO), a folder (EISDIR)
        with contextlib.suppress(FileNotFoundError):  # else the open below says why
            os.unlink(name, dir_fd=folder)  # a folder stays: IsADirectoryError
        fd = os.open(name, flags | os.O_EXCL, 0o644, dir_fd=folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            os.close(fd)
            os.unlink(name, dir_fd=folder)
            fd = os.open(name, flags | os.O_EXCL, 0o644, dir_fd=folder)
        os.pwrite(fd, data, 0)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def read_regular(path: Path, cap: int) -> bytes | None:
    """At most `cap` bytes of `path` if it is a regular file of its own; None otherwise. Never
    follows a link and never blocks: a command may have put a FIFO where the harness reads."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size < cap and (chunk := os.read(fd, min(1 << 20, cap - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


@contextlib.contextmanager
def folder_within(root: Path, parts: Sequence[str]) -> Iterator[int]:
    """A descriptor of `root/parts...`, each level made if missing and replaced if it is
    anything but a folder of its own (a link, a file): never resolved through a link."""
    fd = os.open(root, _DIRECTORY)
    try:
        for part in parts:
            child = enter_folder(fd, part)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def enter_folder(fd: int, part: str) -> int:
    """A new descriptor of the folder `part` in `fd`: made if missing, replaced if it is
    anything but a folder of its own (a link, a file), never resolved through a link."""
    if part in ("", ".", "..") or "/" in part:
        raise ValueError(f"not a plain name: {part!r}")
    try:
        return os.open(part, _DIRECTORY, dir_fd=fd)
    except FileNotFoundError:
        pass
    except OSError:  # a link (ELOOP) or not a folder (ENOTDIR): ours to replace
        os.unlink(part, dir_fd=fd)
    with contextlib.suppress(FileExistsError):  # made meanwhile: opened (and checked) below
        os.mkdir(part, 0o755, dir_fd=fd)
    return os.open(part, _DIRECTORY, dir_fd=fd)


def overwrite_within(root: Path, relative: str, text: str) -> None:
    """`overwrite` of `root/relative`, its folders walked without following a link."""
    *folders, name = relative.split("/")
    with folder_within(root, folders) as folder:
        _overwrite_at(folder, name, text.encode())


def fresh_directory_within(root: Path, relative: str) -> Path:
    """`root/relative` as a new empty folder (what was there removed, never through a
    link); its path, for a boxed command to write into."""
    *folders, name = relative.split("/")
    with folder_within(root, folders) as folder:
        remove_within_fd(folder, name)
        os.mkdir(name, 0o755, dir_fd=folder)
    return root.joinpath(*folders, name)


def remove_within(root: Path, relative: str) -> None:
    """`root/relative` removed, whatever it is, without following a link on the way."""
    *folders, name = relative.split("/")
    with folder_within(root, folders) as folder:
        remove_within_fd(folder, name)


def remove_within_fd(folder: int, name: str) -> None:
    try:
        st = os.lstat(name, dir_fd=folder)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=folder)
    else:
        os.unlink(name, dir_fd=folder)
