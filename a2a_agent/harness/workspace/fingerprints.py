"""A working tree's fingerprint: a hash of every path's type, size, modification and change
times (a command cannot set the change time back), and HEAD; made without a process, for
telling whether anything changed the tree between steps."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Collection
from pathlib import Path

# Trees up to this many entries are fingerprinted on the event loop (a fraction of a
# millisecond); larger ones in a thread, so a big checkout never holds up requests.
INLINE_FINGERPRINT_ENTRIES = 2000

# How many entries each workspace's tree had when last fingerprinted (bounded by the tasks
# this process works; a forgotten one is simply fingerprinted in a thread once).
_tree_sizes: dict[Path, int] = {}


async def tree_fingerprint(root: Path, head: str | None, *, skip_top: Collection[str]) -> str:
    """The fingerprint of the tree at `root` with HEAD at `head`, leaving out the top-level
    names in `skip_top`; a large tree's read in a thread."""
    if _tree_sizes.get(root, INLINE_FINGERPRINT_ENTRIES + 1) <= INLINE_FINGERPRINT_ENTRIES:
        return _fingerprint(root, head, skip_top)
    return await asyncio.to_thread(_fingerprint, root, head, skip_top)


def _fingerprint(root: Path, head: str | None, skip_top: Collection[str]) -> str:
    digest = hashlib.sha256(f"HEAD {head}\n".encode())
    stack = [(root, "")]
    seen = 0
    while stack:
        directory, prefix = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            if not prefix and entry.name in skip_top:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = prefix + entry.name
            digest.update(
                f"{rel}\0{st.st_mode}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\n".encode(
                    errors="surrogateescape"
                )
            )
            seen += 1
            if entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), rel + "/"))
    if len(_tree_sizes) > 10_000:
        _tree_sizes.clear()
    _tree_sizes[root] = seen
    return digest.hexdigest()
