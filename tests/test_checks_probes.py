"""The bisect's probe folders (`.git/a2a-probe/<commit>`): a probed check runs in the box with
write access there, so it can leave a link where the harness, outside the box, later removes
the folder. The removal walks from the workspace and never deletes through a link."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2a_agent.harness.checks.reverify import probe_folder, remove_probe

SHA = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with a `.git`, and a folder outside it holding what a probe's folder would
    be called there, with a file in it the harness must never delete."""
    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / ".git").mkdir(parents=True)
    (outside / SHA[:12]).mkdir(parents=True)
    (outside / SHA[:12] / "precious").write_text("keep me")
    (outside / "also").write_text("keep me too")
    return workspace, outside


def untouched(outside: Path) -> bool:
    return (outside / SHA[:12] / "precious").read_text() == "keep me" and (
        outside / "also"
    ).read_text() == "keep me too"


def test_a_probe_folder_is_removed_with_what_the_check_left_in_it(
    places: tuple[Path, Path],
) -> None:
    workspace, outside = places
    probe = workspace / probe_folder(SHA)
    (probe / "deep" / "er").mkdir(parents=True)
    (probe / "deep" / "er" / "out.txt").write_text("built")
    (probe / "to-outside").symlink_to(outside)  # a link inside: removed, not followed
    (probe / "deep" / "up").symlink_to(outside / SHA[:12])
    remove_probe(workspace, SHA)
    assert not probe.exists() and not probe.is_symlink()
    assert (workspace / ".git" / "a2a-probe").is_dir()
    remove_probe(workspace)
    assert list((workspace / ".git").iterdir()) == []
    assert untouched(outside)


def test_a_planted_link_to_the_probes_never_deletes_outside(places: tuple[Path, Path]) -> None:
    workspace, outside = places
    planted = workspace / ".git" / "a2a-probe"
    planted.symlink_to(outside)
    # Through the link, `.git/a2a-probe/<commit>` is the folder outside, and a plain
    # `shutil.rmtree(path, True)` of it deletes it.
    assert (workspace / probe_folder(SHA) / "precious").exists()
    remove_probe(workspace, SHA)
    assert untouched(outside)
    assert planted.is_dir() and not planted.is_symlink()  # a folder of its own now
    # The round's last clean-up, with the link planted again: the link goes, not its target.
    planted.rmdir()
    planted.symlink_to(outside)
    remove_probe(workspace)
    assert not planted.exists() and not planted.is_symlink()
    assert untouched(outside)


def test_a_planted_link_for_the_commit_itself_is_removed_alone(
    places: tuple[Path, Path],
) -> None:
    workspace, outside = places
    (workspace / ".git" / "a2a-probe").mkdir()
    (workspace / probe_folder(SHA)).symlink_to(outside / SHA[:12])
    remove_probe(workspace, SHA)
    assert not (workspace / probe_folder(SHA)).is_symlink()
    assert untouched(outside)
