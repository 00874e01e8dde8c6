"""Push secrets at rest: sealed, opened only with the same key, one key per home however
many processes make it at once."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from persistence.secrets import SecretBox, SecretUnreadable


def test_processes_starting_together_share_one_key(tmp_path: Path) -> None:
    boxes: list[SecretBox] = []
    threads = [
        threading.Thread(target=lambda: boxes.append(SecretBox.from_settings(None, tmp_path)))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sealed = boxes[0].seal("tok-1")
    assert sealed is not None and sealed.startswith("fernet:") and "tok-1" not in sealed
    assert {b.open(sealed) for b in boxes} == {"tok-1"}
    assert [p.name for p in tmp_path.iterdir()] == ["secret.key"]  # no drafts left
    assert stat.S_IMODE((tmp_path / "secret.key").stat().st_mode) == 0o600


def test_another_key_cannot_open_a_secret(tmp_path: Path) -> None:
    sealed = SecretBox.from_settings(None, tmp_path / "a").seal("tok-2")
    with pytest.raises(SecretUnreadable, match="A2A_AGENT_SECRET_KEY"):
        SecretBox.from_settings(None, tmp_path / "b").open(sealed)
    assert SecretBox.from_settings(None, tmp_path / "b").open("plain") == "plain"  # older rows
