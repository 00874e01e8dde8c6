"""A verified item's bundle whose pack the harness wrote itself (`packs.py`): every change a
command can make to a tree restores from the bundles alone, and whatever the pack cannot be
sure of (an object only in a pack, one whose contents do not match its name, several commits,
a large change) is left to git, whose pack restores the same."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from a2a_agent.harness.workspace import packs
from a2a_agent.harness.workspace.git import GIT, bundle_of
from a2a_agent.harness.workspace.packs import pack_since
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.workspace import Workspace


def git(root: Path, *args: str) -> str:
    done = subprocess.run(
        [GIT, "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def restored(tmp_path: Path, bundles: list[bytes]) -> Path:
    """A fresh repository that fetched each bundle in turn, as a lost workspace's restore does."""
    again = tmp_path / f"again-{len(list(tmp_path.iterdir()))}"
    again.mkdir()
    git(again, "init", "-q", "-b", "main")
    for n, bundle in enumerate(bundles):
        path = again / f"{n}.bundle"
        path.write_bytes(bundle)
        git(again, "fetch", "-q", str(path), "main:refs/heads/restored")
    return again


# Each change a command can make between two verified items, as shell run in the workspace.
CHANGES = {
    "a new file": "echo one > one.txt",
    "a changed file": "echo two >> one.txt",
    "a new nested folder": "mkdir -p a/b/c && echo deep > a/b/c/deep.txt && echo x > a/x",
    "names beside a folder's, in git's order": "echo 1 > a.txt && echo 2 > a-b && echo 3 > a0",
    "a file deep inside changed": "echo deeper >> a/b/c/deep.txt",
    "a removed file": "rm a/x",
    "a renamed file": "mv one.txt renamed.txt",
    "the same content at two new paths": "echo same > s1 && echo same > a/s2",
    "an executable bit": "chmod +x renamed.txt",
    "a symbolic link": "ln -s renamed.txt link",
    "a file becomes a folder": "rm s1 && mkdir s1 && echo inner > s1/inner",
    "a folder becomes a file": "rm -r s1 && echo flat > s1",
    "an old content back": "echo one > renamed.txt",
    "nothing": "true",
    "a folder removed": "rm -r a",
}


async def test_each_change_restores_from_packs_written_here(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=False))
    await ws.ensure()
    bundles: list[bytes] = []
    previous: str | None = None
    for n, (what, change) in enumerate(CHANGES.items()):
        subprocess.run(["/bin/sh", "-c", change], cwd=ws.root, check=True)
        head = ws.head()
        sha, bundle = await ws.commit(f"item {n}: {what}", f"key-{n}", previous)
        assert bundle is not None, what
        ours = pack_since(ws.git_dir, sha, previous)
        assert ours is not None, f"{what}: the pack was left to git"
        assert bundle.endswith(ours), f"{what}: the bundle holds another pack"
        assert head == previous
        bundles.append(bundle)
        again = restored(tmp_path, bundles)
        assert git(again, "rev-parse", "restored") == sha, what
        tree = git(ws.root, "rev-parse", "HEAD^{tree}")
        assert git(again, "rev-parse", "restored^{tree}") == tree, what
        git(again, "fsck", "--strict", "--no-dangling", "restored")
        previous = sha


async def test_what_the_pack_cannot_vouch_for_is_left_to_git(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=False))
    await ws.ensure()
    (ws.root / "f").write_text("first\n")
    first, bundle0 = await ws.commit("first", "k0", None)
    assert bundle0 is not None
    bundles = [bundle0]

    # A command that made a merge of its own: git walks the history.
    git(ws.root, "checkout", "-q", "-b", "side")
    (ws.root / "s").write_text("on a side branch\n")
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-q", "-m", "side")
    git(ws.root, "checkout", "-q", "main")
    (ws.root / "f").write_text("by the command\n")
    git(ws.root, "add", "-A")
    git(ws.root, "commit", "-q", "-m", "the command's own")
    git(ws.root, "merge", "-q", "--no-edit", "side")
    (ws.root / "g").write_text("then the item\n")
    second, bundle1 = await ws.commit("second", "k1", first)
    assert pack_since(ws.git_dir, second, first) is None
    assert bundle1 is not None
    bundles.append(bundle1)

    # Everything packed (as after a restore or a clone): the previous commit is not loose.
    git(ws.root, "repack", "-a", "-d", "-q")
    git(ws.root, "prune-packed")
    (ws.root / "h").write_text("after the repack\n")
    third, bundle2 = await ws.commit("third", "k2", second)
    assert bundle2 is not None
    bundles.append(bundle2)

    # A loose object whose contents are not what its name says: planted by a command; git
    # trusts the file that is there, the pack here refuses it.
    (ws.root / "i").write_text("planted\n")
    blob = git(ws.root, "hash-object", "i")
    planted = ws.git_dir / "objects" / blob[:2] / blob[2:]
    planted.parent.mkdir(exist_ok=True)
    planted.write_bytes(zlib.compress(b"blob 5\x00other"))
    (ws.root / "i").unlink()
    fourth, _ = await ws.commit("fourth", "k3", third)
    assert pack_since(ws.git_dir, fourth, third) is not None  # i is gone: nothing planted
    (ws.root / "i").write_text("planted\n")
    fifth, _ = await ws.commit("fifth", "k4", fourth)
    assert pack_since(ws.git_dir, fifth, fourth) is None
    planted.unlink()

    # A large change: git's deltas are worth its process.
    (ws.root / "big").write_bytes(os.urandom(packs.MAX_PACKED_BYTES + 1))
    sixth, bundle5 = await ws.commit("sixth", "k5", fifth)
    assert pack_since(ws.git_dir, sixth, fifth) is None
    assert bundle5 is not None

    again = restored(tmp_path, bundles)
    assert git(again, "rev-parse", "restored") == third
    git(again, "fsck", "--strict", "--no-dangling", "restored")


async def test_a_line_of_commits_packs_here_whole(tmp_path: Path) -> None:
    """A run's result (every commit after the start, or all of them) and a checkpoint after
    a command's own commits: one pack of the line, which restores as git's does."""
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=False))
    await ws.ensure()
    shas: list[str] = []
    checkpoints: list[bytes] = []
    previous: str | None = None
    for n, change in enumerate(CHANGES.values()):
        subprocess.run(["/bin/sh", "-c", change], cwd=ws.root, check=True)
        if n % 3 == 1:  # a command's own commit between the harness's
            git(ws.root, "add", "-A")
            git(ws.root, "commit", "-q", "--allow-empty", "-m", f"the command's {n}")
        previous, bundle = await ws.commit(f"item {n}", f"key-{n}", previous)
        assert bundle is not None
        shas.append(previous)
        checkpoints.append(bundle)
    # Each checkpoint's bundle (two commits where a command made its own) restores in turn.
    again = restored(tmp_path, checkpoints)
    assert git(again, "rev-parse", "restored") == shas[-1]
    git(again, "fsck", "--strict", "--no-dangling", "restored")
    for start in (None, shas[0], shas[4]):
        pack = pack_since(ws.git_dir, shas[-1], start)
        assert pack is not None
        again = restored(tmp_path, [bundle_of(pack, shas[-1], start)] if start is None else [])
        if start is not None:  # the caller holds the start: a bundle on it
            first = pack_since(ws.git_dir, start, None)
            assert first is not None
            again = restored(
                tmp_path, [bundle_of(first, start, None), bundle_of(pack, shas[-1], start)]
            )
        assert git(again, "rev-parse", "restored") == shas[-1]
        git(again, "fsck", "--strict", "--no-dangling", "restored")
    assert pack_since(ws.git_dir, shas[2], shas[5]) is None  # not on the line back


@pytest.mark.parametrize("sandbox", [False, True], ids=["plain", "boxed"])
async def test_a_commit_then_read_frames_a_pack_written_here(tmp_path: Path, sandbox: bool) -> None:
    """The run's last commit with its read script: the script's output follows an empty pack
    frame, and the bundle is still whole."""
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=sandbox))
    await ws.ensure()
    (ws.root / "f").write_text("one\n")
    first, bundle0 = await ws.commit("first", "k0", None)
    (ws.root / "f").write_text("two\n")
    read = ('"$@" rev-parse HEAD; echo done',)
    head, bundle, printed = await ws.commit_then_read("last", "k1", first, read)
    assert printed == f"{head}\ndone\n".encode()
    assert bundle0 is not None and bundle is not None
    again = restored(tmp_path, [bundle0, bundle])
    assert git(again, "rev-parse", "restored") == head
