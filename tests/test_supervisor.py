"""The supervisor's loop on a real pool (no DBOS, no HTTP): how often it does its duties."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from a2a_agent.engine.retention import Pruner, Retention
from a2a_agent.engine.supervisor import Supervisor
from persistence.db import Pool, read
from persistence.replies import PostgresReplyStore
from persistence.watch import PostgresWatchdogStore
from persistence.workers import WorkerIdentity, WorkerRegistry
from tests.persistence.rows import made, rows


class CountingPruner(Pruner):
    """The real pruner, counting its passes (one per reconcile)."""

    passes = 0

    async def prune(self) -> None:
        self.passes += 1
        await super().prune()


async def nothing(*_: object) -> None:
    return None


async def taken(_: str) -> int:
    return 0


async def supervisor_on(
    pool: Pool,
    executor_id: str,
    *,
    start_run: Callable[[str, int], Awaitable[None]] = nothing,
    reconcile_interval_s: float,
    pruner: Pruner | None = None,
) -> Supervisor:
    """A worker's supervisor on `pool`, its executor registered (no DBOS, no HTTP)."""
    identity = WorkerIdentity(
        executor_id=executor_id, role="worker", host=socket.gethostname(), pid=os.getpid()
    )
    registry = WorkerRegistry(pool, identity, timeout_s=30.0)
    await registry.register()
    return Supervisor(
        registry=registry,
        store=PostgresWatchdogStore(pool),
        run_worker=True,
        replies=PostgresReplyStore(pool),
        start_run=start_run,
        take_over=taken,
        reconcile_interval_s=reconcile_interval_s,
        stuck_after_s=3600.0,
        max_run_age_s=86400.0,
        pruner=pruner,
    )


async def test_a_reconcile_interval_below_the_beat_is_kept(pool: Pool, tmp_path: Path) -> None:
    """A 30 s heartbeat timeout beats every 10 s; reconciling asked every 0.5 s happens every
    0.5 s (it once waited for the beat: retention, lost enqueues and dead runs 10 s late)."""
    pruner = CountingPruner(
        PostgresWatchdogStore(pool), Retention(workspaces=tmp_path), nothing, lambda *_: []
    )
    supervisor = await supervisor_on(pool, "sup-1", reconcile_interval_s=0.5, pruner=pruner)
    assert supervisor.beat_s == 10.0
    loop = asyncio.create_task(supervisor.run_forever())
    try:
        deadline = time.monotonic() + 8.0  # well before the first beat
        while pruner.passes < 2:
            assert time.monotonic() < deadline, f"{pruner.passes} reconcile pass(es) in 8 s"
            await asyncio.sleep(0.05)
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


async def test_a_task_waiting_with_no_open_request_is_failed_and_closed(pool: Pool) -> None:
    """A task the retry bug left in input-required under a request already decided waited for
    ever; one with its request open is left to wait."""
    orphan, waiting = await made(pool, 1), await made(pool, 1)
    async with read(pool) as conn:
        for task_id, decision in ((orphan, "retry"), (waiting, None)):
            await conn.execute(
                "UPDATE tasks SET state = 'input_required', segment = 1,"
                " updated_at = now() - interval '1 hour' WHERE id = %s",
                (task_id,),
            )
            await conn.execute(
                "INSERT INTO pauses (task_id, id, kind, segment, summary, options, on_expiry,"
                " expires_at, decision, decided_at) VALUES (%s, 'failure.a.1',"
                " 'repeated_failure', 0, 'failed', '[\"retry\"]', 'reject', now() + interval"
                " '1 day', %s, CASE WHEN %s::text IS NULL THEN NULL ELSE now() END)",
                (task_id, decision, decision),
            )
    started: list[tuple[str, int]] = []

    async def start_run(task_id: str, segment: int) -> None:
        started.append((task_id, segment))

    supervisor = await supervisor_on(pool, "sup-2", start_run=start_run, reconcile_interval_s=60.0)
    await supervisor.tick(reconcile=True)
    states = {
        r["id"]: (r["state"], r["status_text"])
        for r in await rows(pool, "SELECT id, state, status_text FROM tasks")
    }
    assert states[orphan][0] == "failed" and "no request of it was open" in states[orphan][1]
    assert '{"continue": true}' in states[orphan][1]
    assert states[waiting][0] == "input_required"
    assert started == [(orphan, 2)]  # the segment that closes its record
