"""DBOS Transact as the run engine: a task's run is one workflow, each harness call one step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from dbos import DBOS, DBOSConfiguredInstance, DBOSPortableJSONSerializer, SetWorkflowID

from a2a_agent.harness.plan_harness import PlanHarness
from persistence.errors import StoreError
from persistence.records import TERMINAL_STATES
from persistence.store import TaskStore

log = logging.getLogger(__name__)
RUN_QUEUE = "a2a-runs"
APP_NAME = "a2a-agent"


@DBOS.dbos_class()
class PlanRunner(DBOSConfiguredInstance):
    """The workflow and its steps. The body decides only from step outputs, so it replays."""

    def __init__(self, harness: PlanHarness) -> None:
        self.harness = harness
        super().__init__("plan-runner")

    @DBOS.step()
    async def snapshot(self, task_id: str) -> dict[str, Any]:
        return await self.harness.snapshot(task_id)

    @DBOS.step()
    async def begin_task(self, task_id: str) -> dict[str, Any]:
        return await self.harness.begin_task(task_id)

    @DBOS.step()
    async def begin_attempt(self, task_id: str, item_id: str, attempt: int) -> dict[str, Any]:
        return await self.harness.begin_attempt(task_id, item_id, attempt)

    # Preemptible: a cancel (or stop) interrupts the running command instead of waiting for it;
    # the interrupted step's output is not recorded, so a resume re-runs it under the same key.
    @DBOS.step(preemptible=True)
    async def run_item(self, task_id: str, item_id: str, attempt: int) -> dict[str, Any]:
        return await self.harness.run_item(task_id, item_id, attempt)

    @DBOS.step(preemptible=True)
    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> dict[str, Any]:
        return await self.harness.verify_item(task_id, item_id, attempt)

    @DBOS.step()
    async def finish(self, task_id: str) -> dict[str, Any]:
        return await self.harness.finish(task_id)

    @DBOS.workflow()
    async def run_task(self, task_id: str) -> str:
        snap = await self.snapshot(task_id)
        if snap["state"] in TERMINAL_STATES:
            return str(snap["state"])
        if snap["state"] == "submitted" and (await self.begin_task(task_id))["stopped"]:
            return "stopped"
        for item in snap["items"]:
            status, attempt = item["status"], int(item["attempts"])
            if status == "done":
                continue
            if status == "failed":
                return "failed"
            if status == "pending":
                attempt += 1
                if (await self.begin_attempt(task_id, item["id"], attempt))["stopped"]:
                    return "stopped"
            while True:
                if (
                    status != "verifying"
                    and (await self.run_item(task_id, item["id"], attempt))["stopped"]
                ):
                    return "stopped"
                outcome = (await self.verify_item(task_id, item["id"], attempt))["outcome"]
                if outcome == "done":
                    break
                if outcome != "retry":
                    return str(outcome)
                attempt, status = attempt + 1, "in_progress"
        return str((await self.finish(task_id))["state"])


class DbosEngine:
    """Launches DBOS in this process; `start` enqueues a task's run under its task id."""

    def __init__(
        self,
        *,
        store: TaskStore,
        harness: PlanHarness,
        system_database_url: str,
        executor_id: str,
        application_version: str,
        run_worker: bool,
        worker_concurrency: int,
        reconcile_interval_s: float,
        queue_poll_s: float,
    ) -> None:
        self._store = store
        self._run_worker = run_worker
        self._worker_concurrency = worker_concurrency
        self._reconcile_interval_s = reconcile_interval_s
        self._queue_poll_s = queue_poll_s
        self._reconciler: asyncio.Task[None] | None = None
        DBOS(
            config={
                "name": APP_NAME,
                "system_database_url": system_database_url,
                "application_version": application_version,
                "executor_id": executor_id,
                "serializer": DBOSPortableJSONSerializer(),
                "log_level": "WARNING",
            }
        )
        self._runner = PlanRunner(harness)

    async def launch(self) -> None:
        if not self._run_worker:
            DBOS.listen_queues([])
        DBOS.launch()
        await DBOS.register_queue_async(
            RUN_QUEUE,
            worker_concurrency=self._worker_concurrency,
            polling_interval_sec=self._queue_poll_s,
        )
        if self._run_worker:
            self._reconciler = asyncio.create_task(self._reconcile_forever(), name="reconciler")

    async def shutdown(self) -> None:
        if self._reconciler is not None:
            self._reconciler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconciler
        DBOS.destroy()

    async def start(self, task_id: str) -> None:
        with SetWorkflowID(task_id):
            await DBOS.enqueue_workflow_async(RUN_QUEUE, self._runner.run_task, task_id)

    async def cancel(self, task_id: str) -> None:
        await DBOS.cancel_workflow_async(task_id)

    async def _reconcile_forever(self) -> None:
        """Enqueue tasks stored as submitted whose enqueue was lost (a crash after the commit)."""
        while True:
            await asyncio.sleep(self._reconcile_interval_s)
            try:
                for task_id in await self._store.submitted_task_ids(self._reconcile_interval_s):
                    await self.start(task_id)
            except StoreError as exc:
                log.warning("reconciler: %s", exc)
