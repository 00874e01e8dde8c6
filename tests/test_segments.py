"""One segment of a task's run at a time.

A task's next segment can be started while the one before it still runs: a delegate that
ended before the run reached its wait, or a peer's end taken in while a run recovered after a
crash still replays. Two segments at once would work one workspace together (one restores the
checkpoint under the other's files). The run queue is partitioned by task, so the later
segment waits in the queue until the earlier one ended.
"""

from __future__ import annotations

import asyncio

import psycopg
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_message, plan_of, send, wait_for
from tests.support.processes import StartAgent
from tests.support.workflows import queued_behind_a_blocker

COMPLETED = TaskState.TASK_STATE_COMPLETED
# As an earlier version left a run it enqueued.
UNKEYED = (
    "UPDATE dbos.workflow_status SET queue_partition_key = NULL"
    " WHERE workflow_uuid = %s AND status = 'ENQUEUED'"
)


async def _runs(database_url: str, task_id: str) -> dict[str, tuple[str, int | None, int]]:
    """The task's workflows in DBOS: status, when started, when last updated (ms)."""
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT workflow_uuid, status, started_at_epoch_ms, updated_at"
            " FROM dbos.workflow_status WHERE queue_partition_key = %s",
            (task_id,),
        )
        return {str(r[0]): (str(r[1]), r[2], int(r[3])) for r in await cur.fetchall()}


async def _ended(database_url: str, task_id: str, workflow_id: str) -> str:
    """The workflow's status once it ran and ended (its last step may follow the task's end;
    a segment waiting its turn may still be in the queue)."""
    status = "?"
    for _ in range(150):
        status = (await _runs(database_url, task_id))[workflow_id][0]
        if status not in ("ENQUEUED", "PENDING"):
            break
        await asyncio.sleep(0.1)
    return status


async def test_a_segment_started_while_the_last_one_runs_waits_for_it(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent(A2A_AGENT_HEARTBEAT_TIMEOUT_S="3")  # beats and reconciles every 1 s
    plan = plan_message(
        [
            item("slow", "sleep 6 && echo a > a.txt", "test -f a.txt"),
            item("quick", "echo b > b.txt", "test -f b.txt"),
        ]
    )
    async with a2a_client(server.url) as client:
        task = await send(client, plan)
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING})
        # As a delegate's end does while the run has not reached its wait yet: the task's
        # next segment is numbered; the reconciler enqueues it.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            await conn.execute(
                "UPDATE tasks SET segment = 1, updated_at = updated_at - interval '1 minute'"
                " WHERE id = %s",
                (task.id,),
            )
        second = f"{task.id}:s1"
        seen: list[tuple[str, str]] = []
        for _ in range(200):
            runs = await _runs(database_url, task.id)
            if second in runs:
                seen.append((runs[task.id][0], runs[second][0]))
                if runs[task.id][0] != "PENDING":
                    break
            await asyncio.sleep(0.05)
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    # It was enqueued while the first segment ran, and waited: never both running.
    assert seen and seen[0] == ("PENDING", "ENQUEUED"), seen
    assert ("PENDING", "PENDING") not in seen, seen
    # The second segment finds the task ended and closes nothing.
    assert await _ended(database_url, task.id, second) == "SUCCESS"
    # Its steps came after the first segment's last, by the database's one clock (DBOS's
    # started_at is the queue thread's clock read before its claim, which a loaded machine
    # can delay past the first segment's end: 38 ms earlier than its end was seen once).
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT segment, min(recorded_at), max(recorded_at) FROM step_results"
            " WHERE task_id = %s GROUP BY segment ORDER BY segment",
            (task.id,),
        )
        kept = await cur.fetchall()
    assert [segment for segment, _, _ in kept] == [0, 1], kept
    assert kept[1][1] >= kept[0][2], kept
    # The items were worked once each, on a workspace nobody restored under them.
    assert [(i["id"], i["attempts"]) for i in plan_of(done)["items"]] == [
        ("slow", 1),
        ("quick", 1),
    ]


async def test_a_run_an_earlier_version_enqueued_without_a_key_still_runs(
    start_agent: StartAgent, database_url: str
) -> None:
    """Before the queue was partitioned, runs were enqueued without a partition key, which a
    partitioned queue never hands out: a restart gives each its task's."""
    server = start_agent(A2A_AGENT_WORKER_CONCURRENCY="1")
    async with a2a_client(server.url) as client:
        blocker, queued = await queued_behind_a_blocker(client, database_url, UNKEYED)
        await wait_for(client, blocker, timeout=30)
    server.stop()
    server.start()
    async with a2a_client(server.url) as client:
        done = await wait_for(client, queued, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert await _ended(database_url, queued, queued) == "SUCCESS"
