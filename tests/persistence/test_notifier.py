"""What the task notifier can vouch for (`TaskNotifier.quiet_since`): that nothing changed a
task since a moment without this process hearing of it. A running effect skips its first
look at the task on that word (harness/kernel/effects.py), so a wrong "quiet" would let a
canceled task's command run on: each way it must say "not quiet" is tried here, on a real
LISTEN connection."""

from __future__ import annotations

import asyncio
import contextlib
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


async def test_every_notify_of_a_burst_wakes_its_watcher(
    notifier: TaskNotifier, database_url: str
) -> None:
    # Fifty tasks notified in one commit arrive together: each task's watcher is woken.
    tasks = [f"burst-{n}" for n in range(50)]
    async with contextlib.AsyncExitStack() as stack:
        events = [await stack.enter_async_context(notifier.watch(t)) for t in tasks]
        async with await psycopg.AsyncConnection.connect(database_url) as conn:
            for task_id in tasks:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, task_id))
            await conn.commit()
        await until(lambda: all(e.is_set() for e in events), "every watcher to be woken")


async def test_an_idle_listener_waits_on_its_socket_not_on_a_timer(
    notifier: TaskNotifier, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # psycopg's own `notifies(timeout=...)` looks again every 0.1 s, taking its reader off the
    # loop and putting it back each time: ten wake-ups a second of every idle process. The
    # listener waits on its socket instead: in a quiet second it is woken once at most (its
    # tick), and a NOTIFY still reaches a watcher at once.
    loop = asyncio.get_running_loop()
    added: list[int] = []
    real_add_reader = loop.add_reader

    def add_reader(fd: int, callback: Callable[..., object], *args: object) -> None:
        added.append(fd)
        real_add_reader(fd, callback, *args)

    monkeypatch.setattr(loop, "add_reader", add_reader)
    await asyncio.sleep(1.0)
    assert len(added) <= 2, f"the idle listener put its reader on the loop {len(added)} times"
    async with notifier.watch("woken") as event:
        await notify(database_url, "woken")
        await until(event.is_set, "the NOTIFY to wake its watcher")
