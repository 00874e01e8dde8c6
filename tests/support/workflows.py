"""The engine's own record of runs (DBOS's `workflow_status`), as tests read and bend it."""

from __future__ import annotations

import asyncio
from typing import LiteralString

import psycopg
from a2a.client.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState

from tests.support.a2a import item, plan_message, send, wait_for


async def workflow_status(database_url: str, workflow_id: str) -> str | None:
    async with await psycopg.AsyncConnection.connect(database_url) as conn:
        cur = await conn.execute(
            "SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (workflow_id,)
        )
        row = await cur.fetchone()
        return None if row is None else str(row[0])


async def queued_behind_a_blocker(
    client: Client, database_url: str, change: LiteralString
) -> tuple[str, str]:
    """On a server that runs one task at a time: a task whose command sleeps a minute, and a
    second one left waiting in the queue behind it, whose run `change` (an UPDATE of
    `dbos.workflow_status` taking the workflow id) then bends as the test needs; the first
    is canceled, so the second is handed out next. Their ids."""
    blocker = await send(client, plan_message([item("slow", "sleep 60", "true")]))
    await wait_for(client, blocker.id, {TaskState.TASK_STATE_WORKING})
    queued = await send(client, plan_message([item("b", "echo b > b.txt", "test -f b.txt")]))
    for _ in range(100):
        if await workflow_status(database_url, queued.id) == "ENQUEUED":
            break
        await asyncio.sleep(0.1)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        changed = await conn.execute(change, (queued.id,))
        assert changed.rowcount == 1, f"{queued.id} was not waiting in the queue"
    await client.cancel_task(CancelTaskRequest(id=blocker.id))
    return blocker.id, queued.id
