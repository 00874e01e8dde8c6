"""DBOS Transact as the run engine: a task's run is one workflow, each harness call one step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from dbos import DBOS, DBOSConfig, DBOSPortableJSONSerializer

from a2a_agent.engine.gate import StepGate
from a2a_agent.engine.journal import StepJournal
from a2a_agent.engine.retention import Pruner, Retention
from a2a_agent.engine.runner import READS_ITS_VIEW_FIRST, PlanRunner
from a2a_agent.engine.segments import RUN_QUEUE, enqueue_segment, workflow_id
from a2a_agent.engine.starter import RunStarter
from a2a_agent.engine.supervisor import Supervisor
from a2a_agent.harness.checks.decisions import DecisionSteps
from a2a_agent.harness.checks.facts import FactSteps
from a2a_agent.harness.checks.plan_harness import PlanHarness
from a2a_agent.harness.delegation.delegator import Delegator
from a2a_agent.harness.model.model_work import ModelWork
from a2a_agent.watched import watch
from persistence.engine_connections import engine_connection_factory
from persistence.errors import StoreError
from persistence.notify import RUNS_CHANNEL, TaskNotifier
from persistence.replies import ReplyStore
from persistence.starts import StartStore
from persistence.steps import StepResults
from persistence.watch import WatchdogStore
from persistence.workers import WorkerRegistry

log = logging.getLogger(__name__)
APP_NAME = "a2a-agent"


def _workflow_ids(task_id: str, last_segment: int) -> list[str]:
    return [workflow_id(task_id, n) for n in range(last_segment + 1)]


class DbosEngine:
    """Launches DBOS in this process; `start` enqueues a task's run under its task id."""

    def __init__(
        self,
        *,
        store: WatchdogStore,
        starts: StartStore,
        step_results: StepResults,
        harness: PlanHarness,
        work: ModelWork,
        decisions: DecisionSteps,
        facts: FactSteps,
        delegator: Delegator,
        replies: ReplyStore,
        registry: WorkerRegistry,
        system_database_url: str,
        conninfo: str,
        engine_pool_max: int,
        stalled_after_s: float,
        application_version: str,
        run_worker: bool,
        worker_concurrency: int,
        reconcile_interval_s: float,
        queue_poll_s: float,
        shutdown_grace_s: float,
        stuck_after_s: float,
        max_run_age_s: float,
        retention: Retention,
        fault: Callable[[], None] = lambda: None,
        watch_peers: Callable[[], Awaitable[None]] | None = None,
        alive: Callable[[], None] = lambda: None,
        database_gone: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._run_worker = run_worker
        self._worker_concurrency = worker_concurrency
        self._queue_poll_s = queue_poll_s
        self._shutdown_grace_s = shutdown_grace_s
        self._supervisor_task: asyncio.Task[None] | None = None
        self._starter_task: asyncio.Task[None] | None = None
        # Wakes this worker's starter when a task is sent (the door does not enqueue runs).
        self._sent = TaskNotifier(conninfo, channel=RUNS_CHANNEL)
        self.starter = RunStarter(starts, self.start, self._sent, look_every_s=reconcile_interval_s)
        self.gate = StepGate()
        # DBOS is a process-wide object: it is made at launch, not here, so building the app
        # (and the engine) has no global side effect until the lifespan starts it.
        self._dbos_config: DBOSConfig = {
            "name": APP_NAME,
            "system_database_url": system_database_url,
            "application_version": application_version,
            "executor_id": registry.me.executor_id,
            "serializer": DBOSPortableJSONSerializer(),
            "log_level": "WARNING",
            # DBOS wakes a thread every coalescing interval (10 ms by default) to flush the
            # notifications of its events and streams, which this service does not use: at
            # 100 wake-ups a second it was a third of an idle worker's CPU. Its sleep is not
            # interrupted at shutdown (DBOS.destroy joins the thread), so the interval is
            # also what every stop waits: 0.25 s, at four wake-ups a second.
            "notification_coalesce_sec": 0.25,
            # SQLAlchemy's pre-ping doubles the engine's round trips per step; a connection
            # broken by a database restart fails one call instead, which DBOS retries.
            "db_engine_kwargs": {
                "pool_pre_ping": False,
                # Bounded by the same setting as our own pool: one knob for what a process
                # may hold of the database's connections (about twice it, plus listeners).
                "pool_size": engine_pool_max,
                "max_overflow": 0,
                # A worker silent this long has its runs taken over: a transaction of its
                # engine left open as long (frozen inside it) ends, and its locks with it.
                "creator": engine_connection_factory(conninfo, stalled_after_s),
            },
        }
        self._harness = harness
        self._runner = PlanRunner(
            harness,
            work,
            decisions,
            facts,
            gate=self.gate,
            delegator=delegator,
            journal=StepJournal(step_results, view_first=READS_ITS_VIEW_FIRST),
        )
        self.supervisor = Supervisor(
            registry=registry,
            store=store,
            replies=replies,
            run_worker=run_worker,
            start_run=self.start,
            take_over=self._take_over,
            reconcile_interval_s=reconcile_interval_s,
            stuck_after_s=stuck_after_s,
            max_run_age_s=max_run_age_s,
            pruner=Pruner(store, retention, self._forget_runs, _workflow_ids),
            fault=fault,
            watch_peers=watch_peers,
            alive=alive,
            database_gone=database_gone,
        )

    async def _forget_runs(self, workflow_ids: list[str]) -> None:
        """Drop the DBOS records of pruned tasks' runs (their steps' outputs with them)."""
        await DBOS.delete_workflows_async(workflow_ids, delete_children=True)

    async def launch(self) -> None:
        # Claim the executor id before DBOS recovers "our" runs: two live processes with one
        # id would run the same steps at once.
        await self._registry.register()
        DBOS(config=self._dbos_config)
        if not self._run_worker:
            DBOS.listen_queues([])
        DBOS.launch()  # on this loop, so recovered runs execute on the server's loop
        # One segment of a task at a time (`enqueue_segment`): the task is the partition.
        await DBOS.register_queue_async(
            RUN_QUEUE,
            worker_concurrency=self._worker_concurrency,
            partition_concurrency=1,
            polling_interval_sec=self._queue_poll_s,
        )
        keyed = await self._store.key_runs_by_task(RUN_QUEUE)
        if keyed:
            log.info("%d run(s) enqueued by an earlier version keyed by their task", keyed)
        self._supervisor_task = asyncio.create_task(
            self.supervisor.run_forever(), name="supervisor"
        )
        watch(self._supervisor_task, "the supervisor (heartbeats, janitor, watchdog)")
        if self._run_worker:
            watch(await self._sent.start(), "the listener for tasks sent")
            self._starter_task = asyncio.create_task(self.starter.run_forever(), name="run-starter")
            watch(self._starter_task, "the run starter")

    async def shutdown(self) -> None:
        """Stop taking steps, let those in flight finish (bounded), hand over, stop DBOS.
        DBOS stops whatever cuts the rest short (a cancel of the shutdown itself): left
        launched, it is the one a server started next in this process would get."""
        try:
            await self._hand_over()
        finally:
            DBOS.destroy()

    async def _hand_over(self) -> None:
        for task in (self._supervisor_task, self._starter_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self._sent.stop()
        finished = await self.gate.drain(self._shutdown_grace_s)
        if not finished:
            log.warning(
                "%d step(s) still running after %g s; they resume elsewhere",
                self.gate.in_flight,
                self._shutdown_grace_s,
            )
        try:
            await self._registry.mark_stopped()
        except StoreError as exc:
            log.warning("could not mark this worker stopped: %s", exc)

    async def start(self, task_id: str, segment: int = 0) -> None:
        """Enqueue a segment of a task's run; a segment enqueued before is not run again
        (its workflow id is taken), so a lost or repeated start is harmless."""
        await enqueue_segment(self._runner.run_task, task_id, segment)

    async def cancel(self, task_id: str) -> None:
        """Nothing to do here: the task's row already says canceled, and its run (wherever it
        runs, or when it is dequeued) sees that, stops its effect and closes its record."""

    async def _take_over(self, executor_id: str) -> int:
        """Re-enqueue the runs a dead executor left pending; live workers pick them up."""
        pending = await DBOS.list_workflows_async(
            status="PENDING", executor_id=executor_id, load_input=False, load_output=False
        )
        for workflow in pending:
            await DBOS.resume_workflow_async(workflow.workflow_id, queue_name=RUN_QUEUE)
        return len(pending)
