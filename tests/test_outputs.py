"""A run's outputs are read in one box (`outputs.OUTPUTS_SCRIPT`): the diff, the bundle's
pack, the paths changed and their sizes are what git gives for each read on its own, for
awkward paths (a newline, a tab, a space), a binary file, a deletion, and a run that changed
nothing but the rendered files."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from a2a_agent.harness.kernel import outputs
from a2a_agent.harness.workspace.git import GIT, GIT_ENV
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.workspace import Workspace
from persistence.records import StepView


def git(root: Path, *args: str) -> bytes:
    """Git on its own, unboxed, for what the harness reads in one box."""
    env = {**GIT_ENV, "HOME": str(root)}
    return subprocess.run([GIT, *args], cwd=root, env=env, capture_output=True, check=True).stdout


async def workspace(tmp_path: Path) -> tuple[Workspace, str]:
    ws = Workspace(tmp_path / "task", sandbox=Sandbox())
    await ws.ensure()
    (ws.root / "keep.txt").write_text("kept\n")
    (ws.root / "gone.txt").write_text("going\n")
    (ws.root / "plan.json").write_text("{}\n")
    base, _ = await ws.commit("Start", "t:start", None)
    return ws, base


def view_of(base: str) -> StepView:
    return StepView(
        task_id="t", state="working", goal="", items=[], fingerprint=None,
        checkpoint_sha=None, seed={"kind": "git"}, base_sha=base,
    )  # fmt: skip


async def test_the_outputs_read_in_one_box_are_what_each_read_gives(tmp_path: Path) -> None:
    ws, base = await workspace(tmp_path)
    (ws.root / "gone.txt").unlink()
    (ws.root / "line\nbreak.txt").write_text("odd\n")
    (ws.root / "tab\tand space.txt").write_text("odder\n")
    (ws.root / "blob.bin").write_bytes(bytes(range(256)) * 8)
    (ws.root / "plan.json").write_text('{"changed": true}\n')  # rendered: not an output
    work, _ = await ws.commit("Work", "t:work", base)
    (ws.root / "late.txt").write_text("an attempt cut short\n")
    head, _ = await ws.commit("Run ended", "t:end", work)
    made = await outputs.results(
        ws, view_of(base), outputs.OutputConfig("http://x", 0), before=work
    )
    files, shown = made.files, made.shown
    excluded = list(outputs.EXCLUDED)
    diff = git(ws.root, "diff", "--binary", "--full-index", "--no-color", "--no-ext-diff",
               "--no-textconv", base, head, "--", ".", *excluded)  # fmt: skip
    assert files[0].body == diff and b"GIT binary patch" in diff
    # The bundle builds on the start, which the caller holds, and git takes it.
    bundle = tmp_path / "run.bundle"
    bundle.write_bytes(files[1].body)
    clone = tmp_path / "clone"
    subprocess.run([GIT, "clone", "-q", str(ws.root), str(clone)], check=True)
    subprocess.run([GIT, "-C", str(clone), "checkout", "-q", base], check=True)
    subprocess.run([GIT, "-C", str(clone), "fetch", "-q", str(bundle), "main"], check=True)
    assert git(clone, "rev-parse", "FETCH_HEAD").decode().strip() == head
    changed = {f["path"]: (f["change"], f["size"]) for f in shown[2]["files"]}
    assert changed == {
        "gone.txt": ("deleted", None),
        "line\nbreak.txt": ("added", 4),
        "tab\tand space.txt": ("added", 6),
        "blob.bin": ("added", 2048),
        "late.txt": ("added", 21),
    }
    # The report's files changed are the work's commits', before the closing one.
    assert sorted(made.committed) == sorted(set(changed) - {"late.txt"})


async def test_a_run_that_changed_only_the_rendered_files_has_no_files_changed(
    tmp_path: Path,
) -> None:
    ws, base = await workspace(tmp_path)
    (ws.root / "plan.json").write_text('{"done": 1}\n')
    head, _ = await ws.commit("Rendered", "t:render", base)
    made = await outputs.results(
        ws, view_of(base), outputs.OutputConfig("http://x", 0), before=head
    )
    assert made.files[0].body == b"" and made.shown[2]["files"] == [] and made.committed == []


def test_outputs_cut_short_are_refused_not_read_as_something_else() -> None:
    whole = b"3\n2\n0\n0\n1\nabcxyz"
    assert outputs._framed(whole, outputs.PARTS) == {
        "diff": b"abc", "pack": b"xy", "changes": b"", "tree": b"", "committed": b"z"
    }  # fmt: skip
    with pytest.raises(ValueError, match="committed was cut short"):
        outputs._framed(b"3\n2\n0\n0\n9\nabcxyz", outputs.PARTS)
    with pytest.raises(ValueError, match="lengths"):
        outputs._framed(b"3\n2\nabc", outputs.PARTS)
    with pytest.raises(ValueError, match="lengths"):
        outputs._framed(b"3\nx\n0\n0\n1\nabcxyz", outputs.PARTS)


async def test_the_closing_commit_reads_the_outputs_in_its_own_box(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's last commit and its outputs take one box (`commit_then_read`), and give what
    the commit and a read after it give in two, for twin workspaces; the same commit under
    its key again (a step run again after a crash) reads nothing, and `results` reads then."""
    boxes: list[object] = []
    wrap = Sandbox.wrap

    def counted(self: Sandbox, argv: object, root: object) -> object:
        boxes.append(argv)  # the real box is made all the same
        return wrap(self, argv, root)  # type: ignore[arg-type]

    got: dict[str, outputs.RunOutputs] = {}
    for name in ("one box", "two boxes"):
        ws, base = await workspace(tmp_path / name)
        (ws.root / "gone.txt").unlink()
        (ws.root / "new.txt").write_text("new\n")
        work, _ = await ws.commit("Work", "t:work", base)
        (ws.root / "late.txt").write_text("late\n")
        config, view = outputs.OutputConfig("http://x", 0), view_of(base)
        read = outputs.outputs_read(view, work)
        monkeypatch.setattr(Sandbox, "wrap", counted)
        boxes.clear()
        if name == "one box":
            head, bundle, printed = await ws.commit_then_read("Run ended", "t:end", work, read)
            assert printed is not None
            got[name] = outputs.outputs_of(printed, view, config, base=base, head=head, before=work)
        else:
            head, bundle = await ws.commit("Run ended", "t:end", work)
            got[name] = await outputs.results(ws, view, config, before=work)
        assert len(boxes) == (1 if name == "one box" else 2)
        monkeypatch.setattr(Sandbox, "wrap", wrap)
        assert git(ws.root, "log", "-1", "--format=%s").decode().strip() == "Run ended"
        # The checkpoint holds the closing commit, which git takes.
        assert bundle is not None
        (tmp_path / f"{name}.bundle").write_bytes(bundle)
        listed = git(ws.root, "bundle", "list-heads", str(tmp_path / f"{name}.bundle"))
        assert listed.decode().split()[0] == head
        if name == "one box":
            again = await ws.commit_then_read("Run ended", "t:end", work, read)
            assert again[0] == head and again[2] is None
    one, two = got["one box"], got["two boxes"]
    assert one.files[0].body == two.files[0].body  # the diff: the same blobs on both sides
    assert one.shown[2]["files"] == two.shown[2]["files"]
    assert sorted(one.committed) == sorted(two.committed) == ["gone.txt", "new.txt"]


@pytest.mark.parametrize("seed", [{"kind": "git"}, None], ids=["on-the-start", "whole"])
async def test_the_closing_box_leaves_the_runs_pack_to_the_harness(
    tmp_path: Path, seed: dict[str, str] | None
) -> None:
    """Where the run's commits are a line of loose commits, the closing box sends no pack and
    the harness writes it (`run_pack`): the bundle fetches into a repository that holds the
    start (a caller's) or into an empty one (the whole history)."""
    ws, base = await workspace(tmp_path / "ws")
    view = dataclasses.replace(view_of(base), seed=seed)
    (ws.root / "new.txt").write_text("new\n")
    work, _ = await ws.commit("Work", "t:work", base)
    (ws.root / "late.txt").write_text("late\n")
    assert outputs.packs_here(ws, view, work)
    read = outputs.outputs_read(view, work, pack_here=True)
    head, _, printed = await ws.commit_then_read("Run ended", "t:end", work, read)
    assert printed is not None
    assert outputs._framed(printed, outputs.PARTS)["pack"] == b""  # git packed nothing
    pack = await outputs.run_pack(ws, view, head)
    config = outputs.OutputConfig("http://x", 0)
    made = outputs.outputs_of(printed, view, config, base=base, head=head, before=work, pack=pack)
    bundle = tmp_path / "run.bundle"
    bundle.write_bytes(made.files[1].body)
    target = tmp_path / "target"
    if seed is not None:  # the caller's clone, at the start
        subprocess.run([GIT, "clone", "-q", str(ws.root), str(target)], check=True)
        subprocess.run([GIT, "-C", str(target), "checkout", "-q", base], check=True)
    else:
        subprocess.run([GIT, "init", "-q", str(target)], check=True)
    subprocess.run([GIT, "-C", str(target), "bundle", "verify", "-q", str(bundle)], check=True)
    subprocess.run([GIT, "-C", str(target), "fetch", "-q", str(bundle), "main"], check=True)
    assert git(target, "rev-parse", "FETCH_HEAD").decode().strip() == head
    subprocess.run([GIT, "-C", str(target), "fsck", "--strict", "--no-dangling"], check=True)
