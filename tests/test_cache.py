"""The GetTask cache: a notification drops a row; a read that raced a write is not kept."""

from __future__ import annotations

from datetime import UTC, datetime

from persistence.cache import TaskReadCache
from persistence.records import TaskRow


def row(task_id: str, state: str = "working") -> TaskRow:
    return TaskRow(
        task_id=task_id,
        owner="",
        context_id="c",
        state=state,
        status_text=None,
        status_at=datetime.now(UTC),
        history=[],
        metadata={},
        plan=None,
        report=None,
        event_seq=1,
    )


def test_off_until_the_listener_connects() -> None:
    cache = TaskReadCache()
    token = cache.begin_read("t")
    cache.end_read("t", token, row("t"))
    assert cache.get("t") is None
    cache.reset(enabled=True)
    token = cache.begin_read("t")
    cache.end_read("t", token, row("t"))
    got = cache.get("t")
    assert got is not None and got.state == "working"


def test_notification_drops_the_row() -> None:
    cache = TaskReadCache()
    cache.reset(enabled=True)
    cache.end_read("t", cache.begin_read("t"), row("t"))
    cache.invalidate("t")
    assert cache.get("t") is None


def test_a_read_that_raced_a_write_is_not_cached() -> None:
    cache = TaskReadCache()
    cache.reset(enabled=True)
    token = cache.begin_read("t")
    cache.invalidate("t")  # a write committed while the query ran
    cache.end_read("t", token, row("t", "working"))
    assert cache.get("t") is None


def test_losing_the_listener_empties_and_disables() -> None:
    cache = TaskReadCache()
    cache.reset(enabled=True)
    token = cache.begin_read("t")
    cache.reset(enabled=False)
    cache.end_read("t", token, row("t"))
    assert cache.get("t") is None
    cache.reset(enabled=True)
    assert cache.get("t") is None


def test_bounded() -> None:
    cache = TaskReadCache(max_rows=2)
    cache.reset(enabled=True)
    for name in ("a", "b", "c"):
        cache.end_read(name, cache.begin_read(name), row(name))
    assert cache.get("a") is None and cache.get("c") is not None
