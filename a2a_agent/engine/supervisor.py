"""Background duties of every process: heartbeat, and in workers the janitor and reconciler."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from a2a_agent.engine.retention import Pruner
from a2a_agent.errors import AgentError
from persistence.errors import StoreError
from persistence.replies import Reply, ReplyStore
from persistence.watch import WatchdogStore
from persistence.workers import WorkerRegistry

log = logging.getLogger(__name__)

# How often tasks waiting with no open request are looked for (the first reconcile after a
# start looks at once): only a fault makes one, and the scan reads every waiting task.
ORPHAN_CHECK_S = 3600.0


class DatabaseGone(AgentError):
    """The database cannot come back while this process runs (its embedded server died)."""


class Supervisor:
    def __init__(
        self,
        *,
        registry: WorkerRegistry,
        store: WatchdogStore,
        run_worker: bool,
        replies: ReplyStore,
        start_run: Callable[[str, int], Awaitable[None]],
        take_over: Callable[[str], Awaitable[int]],
        reconcile_interval_s: float,
        stuck_after_s: float,
        max_run_age_s: float,
        pruner: Pruner | None = None,
        fault: Callable[[], None] = lambda: None,
        watch_peers: Callable[[], Awaitable[None]] | None = None,
        alive: Callable[[], None] = lambda: None,
        database_gone: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.watch_peers = watch_peers
        self.database_gone = database_gone
        self.alive = alive
        self.registry = registry
        self.store = store
        self.run_worker = run_worker
        self.start_run = start_run
        self.replies = replies
        self.take_over = take_over
        self.reconcile_interval_s = reconcile_interval_s
        self.stuck_after_s = stuck_after_s
        self.max_run_age_s = max_run_age_s
        self.pruner = pruner
        self.lost_executor_id = False
        self._orphans_due = 0.0  # the first reconcile looks
        self.fault = fault

    @property
    def beat_s(self) -> float:
        return max(0.2, self.registry.timeout_s / 3)

    @property
    def wake_s(self) -> float:
        """How often the loop runs: every beat, or as often as reconciling is asked for when
        that is sooner (a reconcile interval below the beat was once held to the beat: 10 s
        with the defaults, whatever it said)."""
        return min(self.beat_s, max(0.2, self.reconcile_interval_s))

    async def run_forever(self) -> None:
        """Beat until cancelled. Database trouble is logged and waited out; any other error
        ends this task, which ends the process (see `a2a_agent.watched`)."""
        last_reconcile = time.monotonic()
        while True:
            await asyncio.sleep(self.wake_s)
            # Before any database work: a liveness probe tells a hung process from a database
            # that is away (which this loop waits out).
            self.alive()
            self.fault()
            # Decided once: a tick that began before the interval was up and ended after it
            # must not count as the reconcile it did not do.
            due = time.monotonic() - last_reconcile >= self.reconcile_interval_s
            try:
                await self.tick(reconcile=due)
            except StoreError as exc:
                gone = self.database_gone()
                if gone is not None:  # an outage that never ends: the process stops
                    raise DatabaseGone(gone) from exc
                log.warning("supervisor: %s", exc)
                continue
            if due:
                last_reconcile = time.monotonic()

    async def tick(self, *, reconcile: bool) -> None:
        if not await self.registry.heartbeat():
            if not self.lost_executor_id:
                log.error(
                    "executor id %s was claimed by another process", self.registry.me.executor_id
                )
            self.lost_executor_id = True
            return
        if not self.run_worker:
            return
        handed = await self.registry.hand_over_dead(self.take_over)
        for executor_id, count in handed.items():
            log.warning(
                "worker %s stopped heartbeating; resumed its %d run(s) here", executor_id, count
            )
        for task_id, why in await self.store.stuck_tasks(self.stuck_after_s, self.max_run_age_s):
            reason = (
                f"stopped: older than the maximum run age of {self.max_run_age_s:g} s"
                if why == "max_age"
                else f"stopped as stuck: no step finished for {self.stuck_after_s:g} s"
            )
            log.warning("task %s %s", task_id, reason)
            try:
                # The run notices, stops its effect and closes its record.
                await self.store.fail_task(task_id, reason)
            except AgentError as exc:  # this run's trouble (its workspace), not the process's
                log.error("could not stop task %s: %s", task_id, exc)
        await self.expire_requests()
        if reconcile:
            # (A task sent whose run was not enqueued yet is the starter's: engine/starter.py.)
            # A wait that ended (reply, expiry, cancel) whose next segment was not enqueued.
            for task_id, segment in await self.store.segments_to_start(self.reconcile_interval_s):
                await self.start_run(task_id, segment)
            await self.end_dead_runs()
            if time.monotonic() >= self._orphans_due:
                self._orphans_due = time.monotonic() + ORPHAN_CHECK_S
                await self.end_orphaned_waits()
            if self.pruner is not None:
                await self.pruner.prune()
        if self.watch_peers is not None:
            # Peers' tasks this service waits on: pushes may not come, so look now and then.
            await self.watch_peers()

    async def end_dead_runs(self) -> None:
        """A run the engine ended without its task (an error outside every step, too many
        recoveries, a cancel in DBOS) would leave the task working for ever: fail it, saying
        so, and start a segment of its own that closes its record (report, commit) as for
        any other stop. (A workflow DBOS marked ERROR cannot be resumed; a new one can.)"""
        for dead in await self.store.dead_runs():
            log.error(
                "task %s: its run %s ended in the engine as %s without ending the task; "
                "failing it. %s",
                dead.task_id,
                dead.workflow_id,
                dead.status,
                dead.error,
            )
            reason = (
                "stopped: its run ended unexpectedly and could not go on "
                f"(engine status {dead.status}); the worker's log has the cause"
            )
            await self._fail_and_close(dead.task_id, dead.segment, reason)

    async def end_orphaned_waits(self) -> None:
        """A task waiting for a person with no request open to answer would wait for ever
        (the retry bug fixed in df89560 left such tasks): fail it, saying so and how to go
        on, and start a segment that closes its record. Its work stays; `continue` resumes
        from its last commit."""
        for task_id, segment in await self.store.orphaned_waits(self.reconcile_interval_s):
            log.error("task %s waits for an answer but has no open request; failing it", task_id)
            reason = (
                "stopped: it waited for an answer, but no request of it was open to answer "
                "(a fault of this service, not of the caller); its work is kept: send a "
                'message with a DataPart {"continue": true} and referenceTaskIds naming it '
                "to go on from its last commit"
            )
            await self._fail_and_close(task_id, segment, reason)

    async def _fail_and_close(self, task_id: str, segment: int, reason: str) -> None:
        """Fail a task no run is left to end, and start the segment that closes its record
        (report, commit), unless another worker's supervisor ended it meanwhile."""
        try:
            if await self.store.fail_task(task_id, reason, closing_segment=True):
                await self.start_run(task_id, segment + 1)
        except AgentError as exc:
            log.error("could not end task %s: %s", task_id, exc)

    async def expire_requests(self) -> None:
        """Requests nobody answered in time follow their default, recorded as expired."""
        for due in await self.store.expired_pauses():
            answered = await self.replies.answer(
                due.task_id,
                Reply(
                    owner=due.owner,
                    decision=due.on_expiry,
                    approval_id=due.pause_id,
                    how="expired",
                    decided_by="expiry",
                    note="no reply before the request expired; its default applies",
                ),
            )
            if answered.result == "resumed":
                log.warning(
                    "task %s: request %s expired; default %r applied",
                    due.task_id,
                    due.pause_id,
                    due.on_expiry,
                )
                await self.start_run(due.task_id, answered.segment)
                if answered.forwarded is not None:
                    await self.start_run(*answered.forwarded)
