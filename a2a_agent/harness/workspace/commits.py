"""A commit of the index `git add -A` just wrote, made here rather than by `git commit`.

A verified item's commit was two git processes in its box, `git add -A` and `git commit`
(3.2 ms for the second alone, from a small process, here). What `git commit` does after the
add is small: the index's entries as trees, a commit object on HEAD, the branch moved and its
log appended. Done here from the workspace's descriptor, never through a link (a command can
write anything in `.git`); objects are written as git writes them (a temporary file renamed
into place), and one already there is kept only if its contents are what its name says.

Anything this does not read with certainty is left to `git commit` (`commit_index` returns
None): an index of another version than 2 or with a bad checksum, entries in conflict or
flagged (intent to add, skip-worktree), a required extension (a split or sparse index), a
large index, a HEAD that is not `ref: refs/heads/<name>`. The caller runs git then.

`COMMIT_SCRIPT` is git's way, in one shell in the box: for a commit with a read after it (the
run's last, with its outputs), after a command's merge, and where this cannot commit.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import struct
import time
import zlib
from contextlib import suppress
from pathlib import Path

from a2a_agent.harness.workspace.files import (
    enter_folder,
    folder_within,
    overwrite_within,
    read_regular,
)
from a2a_agent.harness.workspace.git import GIT, GIT_ENV, GIT_OPTIONS, PACK, read_head

MAX_INDEX_BYTES = 1 << 20  # past this, git's own commit is as quick as reading it here
_MODES = {0o100644: b"100644", 0o100755: b"100755", 0o120000: b"120000", 0o160000: b"160000"}
_FOLDER = b"40000"
# A branch git itself would name: no part starting with a dot, none ending in ".lock".
_PART = r"[A-Za-z0-9_-](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?"
_BRANCH = re.compile(rf"ref: (refs/heads/{_PART}(?:/{_PART})*)\n?")
_SHA = re.compile(r"[0-9a-f]{40}")
_NO_COMMIT = "0" * 40
_IDENTITY = f"{GIT_ENV['GIT_COMMITTER_NAME']} <{GIT_ENV['GIT_COMMITTER_EMAIL']}>"
Entry = tuple[bytes, bytes, bytes | None]  # name, mode, sha (None: a folder, named later)


_GIT_WORDS = " ".join(shlex.quote(word) for word in (GIT, *GIT_OPTIONS))
# Stage everything, commit with the message in file $1, and, where $3 is set, write a pack of
# the commits after $2 (none: all): the pack is what `git bundle` would hold; we write the
# bundle's header ourselves, which spares `git bundle` and the pack-objects process it starts
# (2.9 ms against 5.5 ms, measured here). Without $3 the harness writes the pack itself from
# the commit's loose objects (`packs.py`), sparing pack-objects too. Without $4 the pack is all
# it prints. With $4, a script that only reads (as `read_script` runs it; its own arguments
# follow, and it gets git and its options after them) runs next on the repository as the
# commit left it, in the same box: a run's last commit and its outputs cost one box, not two
# (a box is about 5 ms of the machine's CPU); the pack is printed framed (its length in bytes
# on a line, then the bytes: none when $3 is empty), then what the script prints.
COMMIT_SCRIPT = f"""set -e
message=$1 previous=$2 with_pack=$3 read=$4
shift 4
pack() {{
  {{ echo HEAD; [ -z "$previous" ] || echo "^$previous"; }} | {_GIT_WORDS} {" ".join(PACK)}
}}
{_GIT_WORDS} add -A
{_GIT_WORDS} commit -q --allow-empty --no-verify -F "$message"
if [ -z "$read" ]; then
  [ -z "$with_pack" ] || pack
  exit
fi
if [ -n "$with_pack" ]; then
  pack=$(mktemp)
  trap 'rm -f "$pack"' EXIT
  pack > "$pack"
  wc -c < "$pack"
  cat "$pack"
else
  echo 0
fi
/bin/sh -c "$read" read "$@" {_GIT_WORDS}
"""


class _Unsure(Exception):
    """Something here git reads better: `git commit` makes the commit."""


def index_entries(index: bytes) -> list[tuple[bytes, bytes, bytes]]:
    """A version 2 index's entries as (path, tree mode, sha as 20 bytes), by path."""
    if len(index) < 32 or index[:4] != b"DIRC":
        raise _Unsure("not an index")
    version, count = struct.unpack(">II", index[4:12])
    if version != 2:
        raise _Unsure(f"index version {version}")
    if hashlib.sha1(index[:-20], usedforsecurity=False).digest() != index[-20:]:
        raise _Unsure("the index's checksum")
    entries = []
    at = 12
    for _ in range(count):
        (mode,) = struct.unpack(">I", index[at + 24 : at + 28])
        (flags,) = struct.unpack(">H", index[at + 60 : at + 62])
        if flags & 0x7000:  # a stage (in conflict) or extended flags
            raise _Unsure("an entry in conflict or flagged")
        end = index.index(b"\x00", at + 62)
        path = index[at + 62 : end]
        if mode not in _MODES:
            raise _Unsure(f"mode {mode:o}")
        entries.append((path, _MODES[mode], index[at + 40 : at + 60]))
        at += (62 + len(path) + 8) & ~7  # the path, then one to eight NULs
    while at < len(index) - 20:  # an extension; a required one starts lower-case
        if not index[at : at + 1].isupper():
            raise _Unsure(f"the required extension {index[at : at + 4]!r}")
        at += 8 + struct.unpack(">I", index[at + 4 : at + 8])[0]
    return entries


def _object(kind: bytes, body: bytes) -> tuple[str, bytes]:
    """An object's name and its contents as stored (header and body)."""
    whole = kind + b" " + str(len(body)).encode() + b"\x00" + body
    return hashlib.sha1(whole, usedforsecurity=False).hexdigest(), whole


def trees_of(entries: list[tuple[bytes, bytes, bytes]]) -> tuple[str, dict[str, bytes]]:
    """The root tree's name and every tree object (name -> contents) of the entries."""
    folders: dict[bytes, list[Entry]] = {b"": []}
    for path, mode, sha in entries:
        parent, _, name = path.rpartition(b"/")
        _add_folders(folders, parent)
        folders[parent].append((name, mode, sha))
    made: dict[str, bytes] = {}
    names: dict[bytes, bytes] = {}
    # The deepest folders first: a folder's tree names its subfolders' trees.
    for folder in sorted(folders, key=lambda f: f.count(b"/") + bool(f), reverse=True):
        listed = folders[folder]
        if len({name for name, _, _ in listed}) != len(listed):
            raise _Unsure("a name twice in one folder")
        rows = []
        for name, mode, child in sorted(listed, key=_tree_order):
            if name in (b"", b".", b"..", b".git") or b"\x00" in name:
                raise _Unsure("a name git would not commit")
            named = child if child is not None else names[folder + b"/" + name if folder else name]
            rows.append(mode + b" " + name + b"\x00" + named)
        sha_hex, whole = _object(b"tree", b"".join(rows))
        names[folder] = bytes.fromhex(sha_hex)
        made[sha_hex] = whole
    return names[b""].hex(), made


def _add_folders(folders: dict[bytes, list[Entry]], folder: bytes) -> None:
    """`folder` and the folders above it, each listed in its parent once."""
    missing = []
    while folder not in folders:
        missing.append(folder)
        folder = folder.rpartition(b"/")[0]
    for new in missing:
        folders[new] = []
    for new in missing:
        parent, _, name = new.rpartition(b"/")
        folders[parent].append((name, _FOLDER, None))


def _tree_order(entry: Entry) -> bytes:
    """git orders a tree by name, a folder's as if it ended in '/'."""
    name, mode, _ = entry
    return name + b"/" if mode == _FOLDER else name


def clean_message(message: str) -> str:
    """The message as `git commit -F` keeps it (its `whitespace` clean-up): each line's
    trailing white space cut, runs of empty lines made one, none at either end."""
    lines: list[str] = []
    for raw in message.split("\n"):
        line = raw.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def _write_object(objects: int, sha: str, whole: bytes) -> None:
    """A loose object in the `objects` folder, unless one sound is there: written beside,
    then renamed into place (a write cut short never leaves a file under the object's name)."""
    folder = enter_folder(objects, sha[:2])
    try:
        with suppress(OSError):
            fd = os.open(sha[2:], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
            try:
                there = os.read(fd, len(whole) + 1024)
            finally:
                os.close(fd)
            with suppress(zlib.error):
                if zlib.decompress(there) == whole:
                    return
        temporary = f"tmp_obj_a2a_{os.getpid()}_{sha[2:12]}"
        with suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(temporary, flags, 0o444, dir_fd=folder)
        try:
            os.write(fd, zlib.compress(whole))
        finally:
            os.close(fd)
        os.rename(temporary, sha[2:], src_dir_fd=folder, dst_dir_fd=folder)
    finally:
        os.close(folder)


def _move_branch(root: Path, ref: str, sha: str) -> None:
    """The branch's file says `sha`, written over in place (`overwrite_within`: never through
    a link, a file that is not its own replaced). Not git's lock file renamed over it: a new
    file is a new inode, about 1 ms on an ext4 measured here, and no other git runs while
    the harness commits. The file is 41 bytes, one write within a block."""
    overwrite_within(root, f".git/{ref}", f"{sha}\n")


def _log(root: Path, ref: str, line: str) -> None:
    """A line at the end of the ref's log (what `git reflog` shows); none if a command put
    something else there."""
    *folders, name = ref.split("/")
    with suppress(OSError), folder_within(root, [".git", "logs", *folders]) as folder:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(name, flags | os.O_CLOEXEC, 0o644, dir_fd=folder)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def commit_index(root: Path, message: str, *, now: int | None = None) -> str | None:
    """Commit the workspace's index on HEAD's branch, as `git commit -q --allow-empty -F`
    would: the new commit's name, or None where `git commit` must make it."""
    git_dir = root / ".git"
    raw_head = read_regular(git_dir / "HEAD", 4096)
    branch = _BRANCH.fullmatch(raw_head.decode(errors="replace")) if raw_head else None
    index = read_regular(git_dir / "index", MAX_INDEX_BYTES + 1)
    if branch is None or index is None or len(index) > MAX_INDEX_BYTES:
        return None
    ref = branch.group(1)
    parent = read_head(git_dir)
    if (parent is not None and not _SHA.fullmatch(parent)) or ref.endswith(".lock"):
        return None
    try:
        tree, trees = trees_of(index_entries(index))
    except (_Unsure, struct.error, ValueError, IndexError):
        return None
    text = clean_message(message)
    when = f"{_IDENTITY} {int(time.time()) if now is None else now} +0000"
    header = f"tree {tree}\n" + (f"parent {parent}\n" if parent else "")
    body = f"{header}author {when}\ncommitter {when}\n\n{text}".encode(errors="replace")
    sha, whole = _object(b"commit", body)
    try:
        with folder_within(root, [".git", "objects"]) as objects:
            for name, contents in trees.items():
                _write_object(objects, name, contents)
            _write_object(objects, sha, whole)
        _move_branch(root, ref, sha)
    except OSError:
        return None  # what was written is unreferenced; git's commit writes its own
    subject = text.split("\n", 1)[0]
    how = "commit" if parent else "commit (initial)"
    line = f"{parent or _NO_COMMIT} {sha} {when}\t{how}: {subject}\n"
    _log(root, "HEAD", line)
    _log(root, ref, line)
    return sha
