"""Wake-ups for task events: one LISTEN connection per process fans NOTIFYs out to waiters."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg import sql

from persistence.cache import TaskReadCache

log = logging.getLogger(__name__)
CHANNEL = "a2a_task_events"
# Only the tasks that have an active push config: what a deliverer of its own listens to, so
# it is not woken by every step of every run (functions.sql, apply_task_change).
PUSH_CHANNEL = "a2a_push_events"
# A task was sent whose run a worker must enqueue (functions.sql, create_task; RunStarter).
RUNS_CHANNEL = "a2a_runs_submitted"
TICK_S = 1.0


ANY_TASK = "*"  # watch(ANY_TASK) wakes on every task's NOTIFY
LOST_WAKE_S = 5.0  # a wake-up may be lost with a dropped LISTEN connection: look again
HEARD_KEEP_S = 30.0  # how long each task's last NOTIFY is remembered (`quiet_since`)


async def next_wake(wake: asyncio.Event, at_most_s: float = LOST_WAKE_S) -> None:
    """Until `wake` (from `TaskNotifier.watch`) is set or `at_most_s` has passed, then cleared:
    the caller reads again either way, so a wake-up lost with the LISTEN connection costs at
    most `at_most_s`."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), at_most_s)
    wake.clear()


async def readable(fd: int, at_most_s: float) -> None:
    """Until `fd` has something to read or `at_most_s` has passed.

    A LISTEN connection waits here rather than in psycopg's `notifies(timeout=...)`, which
    wakes every 0.1 s to look again (its wait's interval), adding and removing the socket's
    reader each time: ten wake-ups a second per listening connection, half of an idle
    server's event-loop CPU (docs/measured.md). One wait per notification or tick here."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    timer = loop.call_later(at_most_s, wake)
    try:
        await ready
    finally:
        timer.cancel()
        loop.remove_reader(fd)


class TaskNotifier:
    """Waiters register per task id; a NOTIFY on commit wakes them to read new event rows.

    Notifications are only a hint: readers always re-read the events table, and they also
    wake on a timeout, so a dropped connection delays an event but never loses it. Any
    database error is a lost connection here (it reconnects); any other error ends the
    listening task, which the runtime watches (`a2a_agent.watched`).
    """

    def __init__(
        self,
        conninfo: str,
        cache: TaskReadCache | None = None,
        *,
        tick: Callable[[], None] = lambda: None,
        channel: str = CHANNEL,
    ) -> None:
        self._conninfo = conninfo
        self._listen_to = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
        self._cache = cache
        self._tick = tick
        self._waiters: defaultdict[str, set[asyncio.Event]] = defaultdict(set)
        # When each task's last NOTIFY was heard (time.monotonic()), oldest first, for
        # HEARD_KEEP_S; and since when LISTEN has been up without a break (None: it is not).
        self._heard: OrderedDict[str, float] = OrderedDict()
        self._listening_since: float | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self._listen(), name="task-notifier")
        return self.task

    async def stop(self) -> None:
        if self._cache is not None:
            self._cache.reset(enabled=False)
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None

    def _wake_all(self) -> None:
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()

    async def _listen(self) -> None:
        delay = 0.2
        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
                delay = 0.2
                try:
                    await self._hear(conn)
                finally:
                    # Closed here, not by `async with`: its exit rolls back first, and that
                    # wait may yield to the loop, where a second cancel (a shutdown cut
                    # short) ended it before the close, leaving the connection open.
                    # close() itself does not yield.
                    await conn.close()
            except psycopg.Error as exc:
                self._listening_since = None
                if self._cache is not None:
                    self._cache.reset(enabled=False)
                log.warning("event listener lost its connection (%s); retrying", exc)
                self._wake_all()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _hear(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """LISTEN on `conn` and fan out what comes, until the connection breaks."""
        await conn.execute(self._listen_to)
        self._listening_since = time.monotonic()
        if self._cache is not None:
            self._cache.reset(enabled=True)
        self._wake_all()  # anything committed while we were away
        # What psycopg kept aside while LISTEN ran (its backlog), once.
        async for note in conn.notifies(timeout=0):
            self._notified(note.payload)
        encoding = conn.info.encoding
        next_tick = time.monotonic() + TICK_S
        while True:
            await readable(conn.fileno(), max(0.0, next_tick - time.monotonic()))
            # What came, read off the connection without a wait of psycopg's
            # (`notifies(timeout=0)` costs 40 us of CPU a call, this 0.6): the socket said it
            # is there, and nothing else runs on this connection.
            conn.pgconn.consume_input()
            while (raw := conn.pgconn.notifies()) is not None:
                self._notified(raw.extra.decode(encoding))
            if time.monotonic() >= next_tick:
                self._tick()
                next_tick = time.monotonic() + TICK_S

    def _notified(self, task_id: str) -> None:
        """A NOTIFY of `task_id`: noted, its cached reads dropped, its watchers woken."""
        self._heard_now(task_id)
        if self._cache is not None:
            self._cache.invalidate(task_id)
        for event in self._waiters.get(task_id, ()):
            event.set()
        for event in self._waiters.get(ANY_TASK, ()):
            event.set()

    def _heard_now(self, task_id: str) -> None:
        now = time.monotonic()
        self._heard.pop(task_id, None)
        self._heard[task_id] = now
        while self._heard:
            oldest, at = next(iter(self._heard.items()))
            if at >= now - HEARD_KEEP_S:
                break
            del self._heard[oldest]

    def quiet_since(self, task_id: str, since: float) -> bool:
        """Whether nothing can have changed task `task_id` since `since` (`time.monotonic()`)
        without this process hearing of it: LISTEN was up all that time and no NOTIFY of
        the task came. A change committed after `since` is heard after it (its NOTIFY goes
        out at its commit); one whose NOTIFY is still on its way wakes `watch` when it comes.
        False whenever it cannot say (LISTEN broken since, or `since` too long ago)."""
        now = time.monotonic()
        if self._listening_since is None or self._listening_since > since:
            return False
        if since < now - HEARD_KEEP_S / 2:
            return False  # what was heard then may be forgotten by now
        return self._heard.get(task_id, -1.0) < since

    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Event]:
        """An event set whenever task `task_id` may have new rows; clear it before re-reading."""
        event = asyncio.Event()
        self._waiters[task_id].add(event)
        try:
            yield event
        finally:
            waiters = self._waiters.get(task_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[task_id]
