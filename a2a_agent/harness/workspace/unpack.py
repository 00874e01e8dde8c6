"""Archives a caller hands over (tar, tar.gz/bz2/xz, zip), unpacked without surprises.

Every member is checked before anything is written: a relative path that stays inside the
target (no leading `/`, no `..`, nothing in `.git`), a regular file, a directory or a symbolic
link whose target stays inside; no hard links, devices or FIFOs; at most `max_files` members
and `max_bytes` unpacked. One bad member refuses the whole archive, with the member named,
and nothing is extracted. Extraction then writes into a directory the caller throws away on
any error, and counts the bytes it actually writes (a zip may lie about its sizes).
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from a2a_agent.errors import PlanError

CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    max_files: int
    max_bytes: int


@dataclass(frozen=True)
class Member:
    name: str
    kind: str  # file | dir | link
    size: int
    target: str | None = None  # a link's target
    raw: str = ""  # its name as the archive spells it


def _inside(name: str, where: str) -> str:
    path = PurePosixPath(name)
    parts = [p for p in path.parts if p not in ("", ".")]
    if path.is_absolute() or name.startswith("/"):
        raise PlanError(f"{where}: member {name!r} has an absolute path; refused")
    if ".." in parts:
        raise PlanError(f"{where}: member {name!r} climbs out with '..'; refused")
    if parts[:1] == [".git"]:
        raise PlanError(f"{where}: member {name!r} writes into .git; refused")
    return "/".join(parts)


def _link_inside(name: str, target: str, links: dict[str, str], where: str) -> None:
    """Where a link leads once extracted, resolved as the kernel will (through the archive's
    other links, which are all the links there will be): it must stay inside and out of
    .git. A chain of links each inside on its own can lead anywhere (`q -> ../..` in a/b,
    then `r -> a/b/q/../..`)."""
    refused = f"{where}: member {name!r} is a link to {target!r}"
    path: list[str] = [p for p in PurePosixPath(name).parent.parts if p not in ("", ".")]
    pending = [p for p in PurePosixPath(target).parts if p not in ("", ".")]
    if target.startswith("/"):
        raise PlanError(f"{refused}, outside the workspace; refused")
    followed = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not path:
                raise PlanError(f"{refused}, outside the workspace; refused")
            path.pop()
            continue
        path.append(part)
        if path[:1] == [".git"]:
            raise PlanError(f"{refused}, into .git; refused")
        through = links.get("/".join(path))
        if through is None:
            continue
        followed += 1
        if followed > 40 or through.startswith("/"):  # the kernel's ELOOP, or out at once
            raise PlanError(f"{refused}, through the link {'/'.join(path)!r}; refused")
        path.pop()
        pending = [p for p in PurePosixPath(through).parts if p not in ("", ".")] + pending


def check_tree(members: list[Member], where: str) -> None:
    """Each name once, and nothing under a file or a link: so no member is written through
    a link the archive makes, whatever order its members come in."""
    kinds: dict[str, str] = {}
    for member in members:
        parts = member.name.split("/")
        for depth in range(1, len(parts)):
            above = "/".join(parts[:depth])
            kind = kinds.setdefault(above, "dir")
            if kind != "dir":
                raise PlanError(
                    f"{where}: member {member.name!r} is under {above!r}, which is a {kind}; "
                    "refused"
                )
        before = kinds.get(member.name)
        if before is not None and not (before == member.kind == "dir"):
            raise PlanError(
                f"{where}: member {member.name!r} appears twice (as a {before} and a "
                f"{member.kind}); refused"
            )
        kinds[member.name] = member.kind
    links = {m.name: str(m.target) for m in members if m.kind == "link"}
    for member in members:
        if member.kind == "link":
            _link_inside(member.name, str(member.target), links, where)


def _open_tar(data: bytes, where: str) -> tarfile.TarFile:
    try:
        return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise PlanError(f"{where}: not a readable tar archive ({exc})") from None


def _tar_members(data: bytes, where: str) -> list[Member]:
    members = []
    with _open_tar(data, where) as archive:
        try:
            for info in archive:
                name = _inside(info.name, where)
                if info.issym():
                    members.append(Member(name, "link", 0, info.linkname))
                elif info.islnk():
                    raise PlanError(f"{where}: member {info.name!r} is a hard link; refused")
                elif info.isdir():
                    members.append(Member(name, "dir", 0))
                elif info.isreg():
                    members.append(Member(name, "file", info.size))
                else:
                    raise PlanError(f"{where}: member {info.name!r} is a device or FIFO; refused")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise PlanError(f"{where}: the tar archive is damaged ({exc})") from None
    return members


def _zip_members(data: bytes, where: str) -> list[Member]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError) as exc:
        raise PlanError(f"{where}: not a readable zip archive ({exc})") from None
    members = []
    with archive:
        for info in archive.infolist():
            name = _inside(info.filename, where)
            mode = info.external_attr >> 16
            if stat.S_ISLNK(mode):
                raise PlanError(f"{where}: member {info.filename!r} is a link; refused")
            if info.is_dir():
                members.append(Member(name, "dir", 0, raw=info.filename))
            else:
                members.append(Member(name, "file", info.file_size, raw=info.filename))
    return members


def is_zip(data: bytes) -> bool:
    return data[:4] in (b"PK\x03\x04", b"PK\x05\x06")


def scan(data: bytes, limits: Limits, where: str) -> list[Member]:
    """Every member, checked; PlanError naming the first that is refused."""
    members = _zip_members(data, where) if is_zip(data) else _tar_members(data, where)
    check_tree(members, where)
    if len(members) > limits.max_files:
        raise PlanError(
            f"{where}: the archive has {len(members)} members; at most {limits.max_files} are "
            "taken (A2A_AGENT_MAX_INPUT_FILES); refused"
        )
    total = sum(m.size for m in members)
    if total > limits.max_bytes:
        raise PlanError(
            f"{where}: the archive unpacks to {total} bytes; at most {limits.max_bytes} are "
            "taken (A2A_AGENT_MAX_UNPACKED_BYTES); refused"
        )
    return members


def extract(data: bytes, target: Path, limits: Limits, where: str) -> int:
    """Unpack into `target` (an empty directory the caller discards on error); the number of
    files written. Checks everything first (`scan`), then writes only regular files,
    directories and inside links, never following a link it made."""
    members = scan(data, limits, where)
    try:
        return _extract(data, members, target, limits, where)
    except OSError as exc:
        raise PlanError(f"{where}: could not be unpacked ({exc.strerror})") from None
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error) as exc:
        # What the headers promised and what the data holds differ (a wrong size or CRC).
        raise PlanError(f"{where}: the archive is damaged ({exc}); refused") from None


def write_file(target: Path, name: str, body: bytes, where: str) -> None:
    """One file of a message at `target/name`: its folders made without following a link
    (an archive of the same message may have made one), the file new and no link."""
    try:
        _write(io.BytesIO(body), target, name, len(body), where)
    except OSError as exc:
        raise PlanError(f"{where}: could not be written ({exc.strerror})") from None


def _extract(data: bytes, members: list[Member], target: Path, limits: Limits, where: str) -> int:
    written = 0
    budget = limits.max_bytes
    if is_zip(data):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in members:
                if member.kind == "dir":
                    _directory(target, PurePosixPath(member.name).parts, where)
                    continue
                with archive.open(member.raw) as source:
                    budget -= _write(source, target, member.name, budget, where)
                written += 1
        return written
    with _open_tar(data, where) as archive:
        for info, member in zip(archive.getmembers(), members, strict=True):
            path = target / member.name
            if member.kind == "dir":
                _directory(target, PurePosixPath(member.name).parts, where)
            elif member.kind == "link":
                parent = _directory(target, PurePosixPath(member.name).parts[:-1], where)
                try:
                    os.symlink(str(member.target), parent / path.name)
                except FileExistsError:
                    raise PlanError(f"{where}: member {member.name!r} appears twice") from None
            else:
                extracted = archive.extractfile(info)
                if extracted is None:
                    raise PlanError(f"{where}: member {member.name!r} cannot be read")
                with extracted:
                    budget -= _write(extracted, target, member.name, budget, where)
                written += 1
    return written


def _directory(target: Path, parts: tuple[str, ...], where: str) -> Path:
    """`target/parts`, made one level at a time, never through a link an earlier member made."""
    current = target
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise PlanError(f"{where}: a member would be written through the link {part!r}")
        current.mkdir(exist_ok=True)
    return current


def _write(source: IO[bytes], target: Path, name: str, budget: int, where: str) -> int:
    """Copy one member to `target/name` (a new file, never through a link); its size."""
    path = _directory(target, PurePosixPath(name).parts[:-1], where) / PurePosixPath(name).name
    size = 0
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise PlanError(f"{where}: member {name!r} appears twice; refused") from None
    with os.fdopen(fd, "wb") as out:
        while chunk := source.read(CHUNK):
            size += len(chunk)
            if size > budget:
                raise PlanError(
                    f"{where}: the archive unpacks to more than its limit "
                    "(A2A_AGENT_MAX_UNPACKED_BYTES); refused"
                )
            out.write(chunk)
    return size
