"""The engine's own record of runs (DBOS's `workflow_status`), as tests read and bend it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Sequence
from typing import Any, LiteralString

import psycopg
from a2a.client.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, TaskState
from psycopg import sql

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


def as_dbos_steps(
    conn: psycopg.Connection[Any],
    task_id: str,
    markers: Sequence[str],
    *,
    leave_out: Collection[str] = (),
) -> None:
    """Make a run's history the one the code before the step journal recorded: the patch
    markers given (as `DBOS.patch-<name>`) in place of `own-steps`, then every step the
    journal kept as a DBOS step record after them, by position, under DBOS's own name for
    it (`PlanRunner.<step>`, its output as DBOS's portable JSON), and none in the journal;
    steps named in `leave_out` are left out (code older still did not take them)."""
    (marker,) = conn.execute(
        "SELECT * FROM dbos.operation_outputs WHERE workflow_uuid = %s ORDER BY function_id",
        (task_id,),
    ).fetchall()
    columns = [
        c.name
        for c in conn.execute("SELECT * FROM dbos.operation_outputs LIMIT 0").description or []
    ]
    template = dict(zip(columns, marker, strict=True))
    assert template["function_name"] == "DBOS.patch-own-steps", template
    history = [{**template, "function_name": f"DBOS.patch-{name}"} for name in markers]
    for name, result, failure in conn.execute(
        "SELECT name, result::text, failure FROM step_results "
        "WHERE task_id = %s AND segment = 0 ORDER BY step_no",
        (task_id,),
    ).fetchall():
        if name in leave_out:
            continue
        output = json.dumps(json.loads(result), separators=(",", ":"), ensure_ascii=False)
        history.append(
            {
                **template,
                "function_name": f"PlanRunner.{name}",
                "output": None if failure else output,
                "error": None,
                "serialization": "portable_json",
            }
        )
        assert failure is None, "a failed step has no DBOS form here"
    conn.execute("DELETE FROM dbos.operation_outputs WHERE workflow_uuid = %s", (task_id,))
    conn.execute("DELETE FROM step_results WHERE task_id = %s", (task_id,))
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL("INSERT INTO dbos.operation_outputs ({}) VALUES ({})").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)),
                sql.SQL(", ").join(sql.Placeholder() * len(columns)),
            ),
            [[{**h, "function_id": n + 1}[c] for c in columns] for n, h in enumerate(history)],
        )
