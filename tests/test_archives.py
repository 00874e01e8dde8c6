"""Files a caller hands over, unpacked in the server process (outside the sandbox): nothing
may land outside the workspace, whatever the archive's links, names and sizes say. And the
folders the harness keeps in a workspace stay its own when a command plants links there."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import Part, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from a2a_agent.errors import PlanError
from a2a_agent.harness.workspace.files import fresh_directory_within, overwrite_within
from a2a_agent.harness.workspace.unpack import Limits, extract, scan
from tests.support.a2a import a2a_client, item, send, wait_for
from tests.support.db import rows
from tests.support.processes import StartAgent
from tests.test_pauses import plan_with, send_waiting, text_to
from tests.test_sources import data_message, tar_part

LIMITS = Limits(max_files=100, max_bytes=1 << 20)
COMPLETED = TaskState.TASK_STATE_COMPLETED


def tar_with(*members: tuple[str, str, str]) -> bytes:
    """(kind, name, text or link target), in order: kind one of file, dir, link."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for kind, name, value in members:
            info = tarfile.TarInfo(name)
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
            elif kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = value
                archive.addfile(info)
            else:
                info.size = len(value.encode())
                archive.addfile(info, io.BytesIO(value.encode()))
    return out.getvalue()


def zip_with(files: dict[str, str], links: dict[str, str] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(info, target)
    return out.getvalue()


# The chain found in review: each link is inside on its own, `r` resolves four levels up.
CHAIN = tar_with(
    ("dir", "a/b/c/d", ""),
    ("link", "a/b/c/d/q", "../../../.."),
    ("link", "r", "a/b/c/d/q/../../../.."),
)


@pytest.mark.parametrize(
    ("archive", "said"),
    [
        (CHAIN, "member 'r' is a link to 'a/b/c/d/q/../../../..', outside the workspace"),
        (tar_with(("link", "d", "src"), ("file", "d/x", "1")), "under 'd', which is a link"),
        (tar_with(("link", "a", "b"), ("link", "b", "a/x")), "through the link"),
        (tar_with(("file", "a", "1"), ("file", "a/b", "2")), "under 'a', which is a file"),
        (tar_with(("file", "a", "1"), ("file", "a", "2")), "appears twice"),
        (tar_with(("file", "a/b", "1"), ("file", "a", "2")), "appears twice (as a dir"),
        (tar_with(("link", "hooks", ".git/hooks")), "into .git"),
        (zip_with({"../up.txt": "x"}), "climbs out with '..'"),
        (zip_with({"/abs.txt": "x"}), "has an absolute path"),
        (zip_with({"ok.txt": "x"}, {"l": "/etc"}), "is a link"),
    ],
    ids=["chain", "under-link", "loop", "under-file", "twice", "dir-and-file", "into-git",
         "zip-dotdot", "zip-absolute", "zip-link"],
)  # fmt: skip
def test_a_hostile_archive_is_refused_before_anything_is_written(
    tmp_path: Path, archive: bytes, said: str
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(PlanError, match="refused") as refused:
        extract(archive, target, LIMITS, "file 0")
    assert said in str(refused.value)
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_links_that_stay_inside_are_kept(tmp_path: Path) -> None:
    archive = tar_with(
        ("dir", "v2", ""),
        ("file", "v2/api.md", "two"),
        ("link", "latest", "v2"),
        ("link", "docs/api.md", "../latest/api.md"),
    )
    assert extract(archive, tmp_path, LIMITS, "file 0") == 1
    assert os.readlink(tmp_path / "latest") == "v2"
    assert (tmp_path / "docs" / "api.md").read_text() == "two"


def _lying_zip() -> bytes:
    """A zip whose headers say its one member holds 10 bytes; it holds 200,000."""
    data = bytearray(zip_with({"big.txt": "x" * 200_000}))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.index(signature)
        data[at + offset : at + offset + 4] = struct.pack("<I", 10)
    return bytes(data)


def test_a_zip_that_misstates_its_sizes_is_refused_while_unpacking(tmp_path: Path) -> None:
    lying = _lying_zip()
    assert [m.size for m in scan(lying, LIMITS, "file 0")] == [10]  # the headers pass
    with pytest.raises(PlanError, match=r"damaged|limit"):
        extract(lying, tmp_path, Limits(max_files=10, max_bytes=1000), "file 0")


def test_the_unpacked_size_is_capped(tmp_path: Path) -> None:
    bomb = zip_with({"zeros.bin": "\0" * 300_000})
    assert len(bomb) < 2000
    with pytest.raises(PlanError, match="A2A_AGENT_MAX_UNPACKED_BYTES"):
        scan(bomb, Limits(max_files=10, max_bytes=100_000), "file 0")


async def test_a_zip_archive_seeds_the_workspace(
    start_agent: StartAgent, home: Path, database_url: str
) -> None:
    archive = zip_with({"src/app.py": "print('hi')\n", "README.md": "# Tool\n"})
    plan = {"goal": "g", "items": [item("t", "echo ok > src/ok.txt", "test -f src/ok.txt")]}
    server = start_agent("serve", f"zip-{uuid.uuid4().hex[:6]}")
    part = Part(raw=archive, filename="project.zip", media_type="application/zip")
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": plan}, part))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert (home / "workspaces" / done.id / "src" / "app.py").read_text() == "print('hi')\n"
    assert MessageToDict(done.metadata)["workspace"]["files"] == 2


@pytest.mark.parametrize(
    ("parts", "said"),
    [
        ([tar_part(CHAIN)], "outside the workspace"),
        # The review's exploit: a file of the message written through the archive's link.
        (
            [
                tar_part(tar_with(("dir", "sub", ""), ("link", "r", "sub"))),
                Part(raw=b"escaped", filename="r/ESCAPED.txt", media_type="text/plain"),
            ],
            "under 'r', which is a link",
        ),
        ([tar_part(tar_with(("file", "zeros", "\0" * 5000)))], "A2A_AGENT_MAX_UNPACKED_BYTES"),
    ],
    ids=["chain", "file-through-link", "size"],
)
async def test_the_edge_refuses_them_and_stores_nothing(
    start_agent: StartAgent, database_url: str, home: Path, parts: list[Part], said: str
) -> None:
    server = start_agent(
        "serve", f"arc-{uuid.uuid4().hex[:6]}", A2A_AGENT_MAX_UNPACKED_BYTES="2048"
    )
    plan = {"goal": "g", "items": [item("a", "true", "false")]}
    async with a2a_client(server.url) as client:
        with pytest.raises(InvalidParamsError, match="refused") as refused:
            await send(client, data_message({"plan": plan}, *parts))
    assert said in str(refused.value)
    assert rows(database_url, "SELECT count(*) FROM tasks") == [(0,)]
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())


def test_the_harness_folders_never_follow_a_planted_link(tmp_path: Path) -> None:
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "keep").mkdir()
    (workspace / "answers").symlink_to(outside)
    (workspace / ".git").mkdir()
    (workspace / ".git" / "a2a-probe").symlink_to(outside)
    overwrite_within(workspace, "answers/a.md", "the answer")
    made = fresh_directory_within(workspace, ".git/a2a-probe/keep")
    assert sorted(p.name for p in outside.iterdir()) == ["keep"]
    assert list((outside / "keep").iterdir()) == []
    assert not (workspace / "answers").is_symlink()
    assert (workspace / "answers" / "a.md").read_text() == "the answer"
    assert made == workspace / ".git" / "a2a-probe" / "keep" and made.is_dir()
    assert not made.is_symlink() and not made.parent.is_symlink()


async def test_an_answer_goes_into_the_workspace_whatever_a_command_planted(
    start_agent: StartAgent, home: Path, tmp_path: Path
) -> None:
    outside = Path(f"/tmp/a2a-outside-{uuid.uuid4().hex[:8]}")
    outside.mkdir()
    try:
        items = [
            item(
                "plant", f"ln -s {outside} answers", "test -e answers -o -L answers", precheck=False
            ),
            {"id": "ask", "title": "Which colour?", "ask": "Which colour?"},
        ]
        server = start_agent("serve", f"plant-{uuid.uuid4().hex[:6]}")
        async with a2a_client(server.url) as client:
            waiting = await send_waiting(client, plan_with(items))
            await send(client, text_to(waiting.id, "blue"))
            done = await wait_for(client, waiting.id, timeout=60)
        assert done.status.state == COMPLETED, done.status.message
        assert list(outside.iterdir()) == []
        written = home / "workspaces" / done.id / "answers" / "ask.md"
        assert not written.parent.is_symlink() and "blue" in written.read_text()
    finally:
        for leftover in outside.iterdir():
            leftover.unlink()
        outside.rmdir()
