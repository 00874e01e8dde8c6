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


def test_a_page_is_kept_until_any_task_changes() -> None:
    cache = TaskReadCache()
    assert cache.page("p") is None
    cache.keep_page("p", cache.page_token(), ("t",))
    assert cache.page("p") is None  # off until the listener connects
    cache.reset(enabled=True)
    cache.keep_page("p", cache.page_token(), ("t",))
    assert cache.page("p") == ("t",)
    cache.invalidate("another")  # any task's write: a new one, a state, a status time
    assert cache.page("p") is None


def test_a_page_read_that_raced_a_write_is_not_kept() -> None:
    cache = TaskReadCache()
    cache.reset(enabled=True)
    token = cache.page_token()
    cache.invalidate("t")  # committed while the page's query ran
    cache.keep_page("p", token, ("t",))
    assert cache.page("p") is None
    token = cache.page_token()
    cache.reset(enabled=True)  # the listener reconnected meanwhile
    cache.keep_page("p", token, ("t",))
    assert cache.page("p") is None


def test_pages_are_bounded() -> None:
    cache = TaskReadCache(max_pages=2)
    cache.reset(enabled=True)
    for key in ("a", "b", "c"):
        cache.keep_page(key, cache.page_token(), (key,))
    assert [cache.page(key) for key in ("a", "b", "c")] == [None, ("b",), ("c",)]
