"""What the task notifier can vouch for (`TaskNotifier.quiet_since`): that nothing changed a
task since a moment without this process hearing of it. A running effect skips its first
look at the task on that word (harness/kernel/effects.py), so a wrong "quiet" would let a
canceled task's command run on: each way it must say "not quiet" is tried here, on a real
LISTEN connection."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import psycopg
import pytest

from persistence.notify import CHANNEL, TaskNotifier


async def until(check: Callable[[], bool], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def notify(database_url: str, task_id: str) -> None:
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, task_id))


@pytest.fixture
async def notifier(database_url: str) -> AsyncIterator[TaskNotifier]:
    found = TaskNotifier(database_url)
    await found.start()
    # Once it listens, the moment now can be vouched for.
    await until(lambda: found.quiet_since("none", time.monotonic()), "the LISTEN to be up")
    yield found
    await found.stop()


async def test_a_task_notified_after_a_moment_is_not_quiet_since(
    notifier: TaskNotifier, database_url: str
) -> None:
    since = time.monotonic()
    assert notifier.quiet_since("a", since) and notifier.quiet_since("b", since)
    await notify(database_url, "a")
    await until(lambda: not notifier.quiet_since("a", since), "the NOTIFY to be heard")
    assert notifier.quiet_since("b", since)  # another task's NOTIFY says nothing of b
    # A moment after what was heard is quiet again.
    later = time.monotonic()
    assert notifier.quiet_since("a", later)


async def test_nothing_is_vouched_for_before_listening_or_across_a_break(
    database_url: str,
) -> None:
    notifier = TaskNotifier(database_url)
    before = time.monotonic()
    assert not notifier.quiet_since("a", before)  # not listening yet
    await notifier.start()
    try:
        await until(lambda: notifier.quiet_since("a", time.monotonic()), "the LISTEN to be up")
        since = time.monotonic()
        # The LISTEN came up after `before`: what changed in between went unheard.
        assert not notifier.quiet_since("a", before)
        # The connection breaks: nothing from before the break is vouched for, then or after.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = current_database() AND query LIKE 'LISTEN%%'"
            )
        await until(lambda: not notifier.quiet_since("a", since), "the break to be seen")
        await until(lambda: notifier.quiet_since("a", time.monotonic()), "the LISTEN again", 15)
        assert not notifier.quiet_since("a", since)
    finally:
        await notifier.stop()


async def test_a_moment_too_long_ago_is_not_vouched_for(
    notifier: TaskNotifier, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What was heard is forgotten after a while: a moment older than that says nothing.
    since = time.monotonic()
    assert notifier.quiet_since("a", since)
    monkeypatch.setattr("persistence.notify.HEARD_KEEP_S", 0.0)
    assert not notifier.quiet_since("a", since)
