"""What is kept, and for how long: delivered push configs, ended tasks' records, ended tasks.

Every worker's supervisor prunes on its reconcile pass. An ended task (completed, failed,
canceled, rejected) is compacted `record_s` after it ended: its step records (the effects
ledger), stream events and push deliveries are deleted, with its runs' DBOS workflows and its
workspace; its row, plan, report, items, transitions, decisions, checkpoints and result files
(the diff and bundle) stay. It is deleted whole `task_s` after it ended. A crash between a
delete and the clean-up leaves a workspace directory behind; the sweep (at start and then
hourly) removes those, also the ones on this machine of tasks another worker pruned.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from a2a_agent.harness.workspace.workspace import Workspace
from persistence.watch import WatchdogStore

log = logging.getLogger(__name__)
BATCH = 200
SWEEP_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class Retention:
    workspaces: Path
    push_s: float = 7 * 24 * 3600.0
    task_s: float = 30 * 24 * 3600.0  # 0 keeps ended tasks for ever
    record_s: float = 7 * 24 * 3600.0  # 0 keeps their step records, events and workspaces


def _remove(path: Path) -> None:
    def failed(function: object, name: str, exc_info: object) -> None:
        log.warning("retention: could not remove %s (%s)", name, exc_info)

    if path.is_dir():
        shutil.rmtree(path, onerror=failed)
    else:
        path.unlink(missing_ok=True)


def remove_workspace(workspaces: Path, task_id: str) -> None:
    _remove(workspaces / task_id)
    _remove(workspaces / ".effects" / f"{task_id}.json")
    # Its commands' pid files (one per lane), kept between commands (commands.NO_GROUP).
    for pid_file in Workspace(workspaces / task_id).pid_files():
        _remove(pid_file)


class Pruner:
    def __init__(
        self,
        store: WatchdogStore,
        retention: Retention,
        forget_runs: Callable[[list[str]], Awaitable[None]],
        workflow_ids: Callable[[str, int], list[str]],
    ) -> None:
        self.store = store
        self.retention = retention
        self.forget_runs = forget_runs
        self.workflow_ids = workflow_ids
        self._swept_at: float | None = None

    async def prune(self) -> None:
        pruned = await self.store.prune_pushes(self.retention.push_s)
        if pruned:
            log.info("pruned %d delivered push config(s) of ended tasks", pruned)
        # First their records (compaction), then whole tasks; each batch's runs and workspaces
        # go with its rows.
        await self._in_batches(self.store.compact_tasks, self.retention.record_s, "compacted")
        await self._in_batches(self.store.prune_tasks, self.retention.task_s, "pruned")
        # Also when ended tasks are kept for ever: another worker's compaction leaves this
        # machine's copies of their workspaces for the sweep.
        if self._swept_at is None or time.monotonic() - self._swept_at >= SWEEP_INTERVAL_S:
            await self.sweep()
            self._swept_at = time.monotonic()

    async def _in_batches(
        self,
        take: Callable[[float, int], Awaitable[list[tuple[str, int]]]],
        older_than_s: float,
        done: str,
    ) -> None:
        """`take` ended tasks older than `older_than_s` (0: never), a batch at a time, and
        forget their runs and workspaces."""
        if older_than_s <= 0:
            return
        while True:
            tasks = await take(older_than_s, BATCH)
            if not tasks:
                return
            await self.forget_runs([w for t, s in tasks for w in self.workflow_ids(t, s)])
            for task_id, _ in tasks:
                await asyncio.to_thread(remove_workspace, self.retention.workspaces, task_id)
            log.info("%s %d task(s) ended more than %g s ago", done, len(tasks), older_than_s)
            if len(tasks) < BATCH:
                return

    async def sweep(self) -> None:
        """Remove workspace directories here whose task no longer exists."""
        root = self.retention.workspaces
        names = await asyncio.to_thread(
            lambda: (
                [e.name for e in os.scandir(root) if e.is_dir() and not e.name.startswith(".")]
                if root.is_dir()
                else []
            )
        )
        for start in range(0, len(names), 1000):
            for task_id in await self.store.missing_tasks(names[start : start + 1000]):
                await asyncio.to_thread(remove_workspace, root, task_id)
                log.info("removed the workspace of pruned task %s", task_id)
