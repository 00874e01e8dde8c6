"""A verified item's commit made from the index by the harness (`commits.py`): the same trees
git writes, a commit git reads as its own, and nothing written through what a command
planted in `.git`; whatever it cannot read with certainty is left to `git commit`."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest

from a2a_agent.harness.workspace import workspace as workspace_module
from a2a_agent.harness.workspace.commits import clean_message, commit_index
from a2a_agent.harness.workspace.git import GIT, GIT_ENV
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.workspace import Workspace
from tests.test_packs import CHANGES


def git(root: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(
        [GIT, *args], cwd=root, capture_output=True, text=True, check=check, env=GIT_ENV
    )
    return done.stdout.strip()


def repository(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    return root


def test_each_change_commits_the_tree_git_would(tmp_path: Path) -> None:
    root = repository(tmp_path)
    parent: str | None = None
    for n, (what, change) in enumerate(CHANGES.items()):
        subprocess.run(["/bin/sh", "-c", change], cwd=root, check=True)
        git(root, "add", "-A")
        sha = commit_index(root, f"item {n}: {what}\n\nA2A-Idempotency-Key: k{n}\n")
        assert sha is not None, what
        assert git(root, "rev-parse", "HEAD") == sha, what
        assert git(root, "rev-parse", "HEAD^{tree}") == git(root, "write-tree"), what
        assert git(root, "log", "-1", "--format=%P") == (parent or ""), what
        message = f"item {n}: {what}\n\nA2A-Idempotency-Key: k{n}"
        assert git(root, "log", "-1", "--format=%B") == message
        assert git(root, "status", "--porcelain") == "", what
        parent = sha
    git(root, "fsck", "--strict", "--no-dangling")
    reflog = git(root, "reflog", "--format=%H %gs").splitlines()
    assert reflog[0] == f"{parent} commit: item {len(CHANGES) - 1}: a folder removed"
    assert reflog[-1].endswith("commit (initial): item 0: a new file")
    assert len(reflog) == len(CHANGES)


MESSAGES = [
    "title",
    "title  \n\n\n\nbody line   \n\n",
    "\n\n  indented title\t\n\nA2A-Idempotency-Key: k\n",
    "title\n \n\t\nafter blank lines that hold spaces\n",
    "# not a comment to -F\n\nbody\n",
]


@pytest.mark.parametrize("message", MESSAGES)
def test_a_message_is_kept_as_git_commit_keeps_it(tmp_path: Path, message: str) -> None:
    root = repository(tmp_path)
    (root / "f").write_text("x\n")
    git(root, "add", "-A")
    (root / ".git" / "MSG").write_text(message)
    git(root, "commit", "-q", "--allow-empty", "-F", ".git/MSG")
    by_git = git(root, "cat-file", "commit", "HEAD").partition("\n\n")[2]
    assert clean_message(message) == by_git + "\n"


@pytest.mark.parametrize(
    "setup",
    [
        "git update-index --index-version 4",
        "echo new > new && git add -N new",
        "git update-index --skip-worktree f",
        "git checkout -q --detach",
        "echo 'ref: refs/heads/../x' > .git/HEAD",
    ],
    ids=["index-v4", "intent-to-add", "skip-worktree", "detached", "odd-branch"],
)
def test_what_it_cannot_be_sure_of_is_left_to_git(tmp_path: Path, setup: str) -> None:
    root = repository(tmp_path)
    (root / "f").write_text("x\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    subprocess.run(["/bin/sh", "-c", setup], cwd=root, env=GIT_ENV, check=True)

    def state() -> tuple[bytes, str]:
        return (root / ".git" / "HEAD").read_bytes(), git(root, "rev-parse", "HEAD", check=False)

    before = state()
    assert commit_index(root, "second\n") is None
    assert state() == before


def test_a_conflicted_index_is_left_to_git(tmp_path: Path) -> None:
    root = repository(tmp_path)
    blob = git(root, "hash-object", "-w", "--stdin", check=True)
    info = "".join(f"100644 {blob} {stage}\tc\n" for stage in (1, 2, 3))
    subprocess.run([GIT, "update-index", "--index-info"], cwd=root, input=info.encode(), check=True)
    assert commit_index(root, "merge\n") is None


def test_nothing_is_written_through_what_a_command_planted(tmp_path: Path) -> None:
    """The branch's file, an object's folder and the log a link to elsewhere; an object of
    the commit's tree planted with other contents: the links are replaced, their targets
    untouched, the object written again."""
    root = repository(tmp_path)
    (root / "f").write_text("x\n")
    git(root, "add", "-A")
    tree = git(root, "write-tree")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "branch").write_text("keep\n")
    os.symlink(outside / "branch", root / ".git" / "refs" / "heads" / "main")
    (root / ".git" / "objects" / tree[:2] / tree[2:]).unlink()
    (root / ".git" / "objects" / tree[:2]).rmdir()
    os.symlink(outside, root / ".git" / "objects" / tree[:2])
    os.symlink(outside / "log", root / ".git" / "logs")
    sha = commit_index(root, "planted\n")
    assert sha is not None
    assert sorted(p.name for p in outside.iterdir()) == ["branch"]
    assert (outside / "branch").read_text() == "keep\n"
    assert git(root, "rev-parse", "HEAD") == sha
    git(root, "fsck", "--strict", "--no-dangling")

    (root / "g").write_text("y\n")
    git(root, "add", "-A")
    tree = git(root, "write-tree")
    planted = root / ".git" / "objects" / tree[:2] / tree[2:]
    planted.chmod(0o644)
    planted.write_bytes(zlib.compress(b"tree 0\x00"))
    sha = commit_index(root, "again\n")
    assert sha is not None
    git(root, "fsck", "--strict", "--no-dangling")
    assert git(root, "ls-tree", "--name-only", "HEAD").split() == ["f", "g"]

    # The branch's file a hard link to a file elsewhere: replaced, never written through.
    branch = root / ".git" / "refs" / "heads" / "main"
    branch.unlink()
    (outside / "linked").write_text(f"{sha}\n")
    os.link(outside / "linked", branch)
    (root / "h").write_text("z\n")
    git(root, "add", "-A")
    third = commit_index(root, "a third\n")
    assert third is not None and git(root, "rev-parse", "HEAD") == third
    assert (outside / "linked").read_text() == f"{sha}\n"
    git(root, "fsck", "--strict", "--no-dangling")


async def test_the_workspace_commits_through_git_when_it_must(tmp_path: Path) -> None:
    """A command left an index git writes in version 4: the verified item's commit is git's,
    its bundle whole."""
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=False))
    await ws.ensure()
    (ws.root / "f").write_text("one\n")
    first, _ = await ws.commit("first", "k0", None)
    git(ws.root, "update-index", "--index-version", "4")
    (ws.root / "f").write_text("two\n")
    _, bundle = await ws.commit("second", "k1", first)
    assert bundle is not None
    assert git(ws.root, "log", "-1", "--format=%B") == "second\n\nA2A-Idempotency-Key: k1"
    assert git(ws.root, "rev-parse", "HEAD~1") == first
    assert git(ws.root, "status", "--porcelain") == ""


async def test_a_large_index_is_committed_off_the_event_loop_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index past INLINE_INDEX_BYTES is read and committed in a thread: the same trees."""
    made: list[str | None] = []

    def counted(root: Path, message: str) -> str | None:
        made.append(commit_index(root, message))
        return made[-1]

    monkeypatch.setattr(workspace_module, "commit_index", counted)
    ws = Workspace(tmp_path / "ws", sandbox=Sandbox(enabled=False))
    await ws.ensure()
    for n in range(1500):
        folder = ws.root / f"d{n % 7}" / f"e{n % 11}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"{n}\n")
    first, _ = await ws.commit("many", "k0", None)
    assert (ws.git_dir / "index").stat().st_size > workspace_module.INLINE_INDEX_BYTES
    assert git(ws.root, "rev-parse", "HEAD^{tree}") == git(ws.root, "write-tree")
    (ws.root / "d3" / "e5" / "f1000.txt").write_text("changed\n")
    second, bundle = await ws.commit("one changed", "k1", first)
    assert bundle is not None and git(ws.root, "rev-parse", "HEAD~1") == first
    assert git(ws.root, "rev-parse", "HEAD^{tree}") == git(ws.root, "write-tree")
    assert git(ws.root, "log", "-1", "--format=%H") == second
    assert made == [first, second]  # made here, not by git
    git(ws.root, "fsck", "--strict", "--no-dangling")
