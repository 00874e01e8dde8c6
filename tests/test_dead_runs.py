"""A run the engine gave up on does not leave its task working for ever.

DBOS dead-letters a workflow recovered more times than its limit, and marks one ERROR when
an exception escapes it; either way nothing would move the task again. The supervisor fails
such a task with a reason a person can read, and replays the run once more so that it
closes its record (the report, the final commit) like any other stop."""

from __future__ import annotations

import asyncio

import psycopg
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState

from tests.support.a2a import a2a_client, item, plan_message, plan_of, report_of, send, wait_for
from tests.support.processes import StartAgent

FAILED = TaskState.TASK_STATE_FAILED


async def _workflow_status(database_url: str, workflow_id: str) -> str | None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (workflow_id,)
        )
        row = await cur.fetchone()
        return None if row is None else str(row[0])


async def test_a_dead_lettered_run_fails_its_task_and_closes_the_record(
    start_agent: StartAgent, database_url: str
) -> None:
    # One run at a time: the second task waits in the queue while the first one's command runs.
    server = start_agent(A2A_AGENT_WORKER_CONCURRENCY="1")
    async with a2a_client(server.url) as client:
        blocker = await send(client, plan_message([item("slow", "sleep 60", "true")]))
        await wait_for(client, blocker.id, {TaskState.TASK_STATE_WORKING})
        queued = await send(client, plan_message([item("b", "echo b > b.txt", "test -f b.txt")]))
        for _ in range(100):
            if await _workflow_status(database_url, queued.id) == "ENQUEUED":
                break
            await asyncio.sleep(0.1)
        # As if the run had been recovered a thousand times (a crash loop): DBOS's own claim
        # dead-letters it when the queue hands it out.
        async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
            changed = await conn.execute(
                "UPDATE dbos.workflow_status SET recovery_attempts = 1000"
                " WHERE workflow_uuid = %s AND status = 'ENQUEUED'",
                (queued.id,),
            )
            assert changed.rowcount == 1
        await client.cancel_task(CancelTaskRequest(id=blocker.id))
        final = await wait_for(client, queued.id, {FAILED}, timeout=60)
        for _ in range(300):  # the replay that closes the record follows the failing
            if any(a.artifact_id == "report" for a in final.artifacts):
                break
            await asyncio.sleep(0.1)
            final = await client.get_task(GetTaskRequest(id=queued.id))
    assert "ended unexpectedly" in final.status.message.parts[0].text
    assert "MAX_RECOVERY_ATTEMPTS_EXCEEDED" in final.status.message.parts[0].text
    # The replay closed the record as any stop does: a report, the item never begun.
    assert report_of(final)["remaining"] == ["b"]
    assert [i["status"] for i in plan_of(final)["items"]] == ["pending"]
    for _ in range(100):
        if await _workflow_status(database_url, queued.id) == "SUCCESS":
            break
        await asyncio.sleep(0.1)
    assert await _workflow_status(database_url, queued.id) == "SUCCESS"
