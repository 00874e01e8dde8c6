"""Workers start the runs of the tasks the door stored.

SendMessage stores a task and answers; it does not enqueue the task's run. The DBOS enqueue
was half of a send's CPU in the API process (`bench/throughput.py`: 4.4 ms a send with it,
2.0 without), and the tasks table is a durable queue already. Each worker's starter enqueues
what was sent: woken by the NOTIFY `create_task()` sends on RUNS_CHANNEL, and looking again
every `look_every_s` in case a wake-up was lost (its LISTEN connection dropped, or no worker
ran when the task was sent). Tasks are claimed with SKIP LOCKED, so two workers' starters
never enqueue one task twice; enqueueing is keyed by the task anyway (its workflow id).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from persistence.errors import StoreError
from persistence.notify import ANY_TASK, TaskNotifier, next_wake
from persistence.starts import StartStore

log = logging.getLogger(__name__)
# Tasks claimed per transaction: they stay locked while each is enqueued (a few ms each), so
# a cancel of one of them waits at most that long.
BATCH = 20


class RunStarter:
    def __init__(
        self,
        store: StartStore,
        start: Callable[[str], Awaitable[None]],
        wakes: TaskNotifier,
        *,
        look_every_s: float,
    ) -> None:
        self._store = store
        self._start = start
        self._wakes = wakes
        self._look_every_s = look_every_s

    async def run_forever(self) -> None:
        async with self._wakes.watch(ANY_TASK) as wake:
            while True:
                try:
                    await self.start_waiting()
                except StoreError as exc:  # the database is away: look again after a while
                    log.warning("could not start the runs of new tasks: %s", exc)
                await next_wake(wake, self._look_every_s)

    async def start_waiting(self) -> int:
        """Enqueue the run of every task sent and not enqueued yet; how many were."""
        started = 0
        while True:
            batch = await self._store.start_unstarted(self._start, BATCH)
            started += batch
            if batch < BATCH:
                return started
