"""What the tests of the SQL functions share: a task to start from, and its rows."""

from __future__ import annotations

import uuid
from typing import Any, LiteralString

from persistence.db import Pool, read
from persistence.records import NewItem, NewTask, StepOutcome, StepRecord
from persistence.runs import PostgresRunStore
from persistence.tasks import PostgresTaskStore


def new_task(items: int = 2, **fields: Any) -> NewTask:
    """A task of `items` plain items; `fields` set any other NewTask field."""
    fields.setdefault("task_id", str(uuid.uuid4()))
    return NewTask(
        owner=fields.pop("owner", "o"),
        context_id="c",
        goal=fields.pop("goal", "g"),
        first_message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        items=[NewItem(f"i{n}", f"item {n}", "true", "true", 5, 2) for n in range(items)],
        **fields,
    )


async def made(pool: Pool, items: int = 2, parent_id: str | None = None) -> str:
    """A stored task's id."""
    created = await PostgresTaskStore(pool).create_task(new_task(items, parent_id=parent_id))
    return created.row.task_id


async def rows(pool: Pool, sql: LiteralString, *args: Any) -> list[dict[str, Any]]:
    async with read(pool) as conn:
        cur = await conn.execute(sql, args)
        return await cur.fetchall()


async def task(pool: Pool, task_id: str) -> dict[str, Any]:
    return (await rows(pool, "SELECT * FROM tasks WHERE id = %s", task_id))[0]


async def recorded(runs: PostgresRunStore, task_id: str, step: StepRecord) -> StepOutcome:
    """`step` recorded as the harness records it: against the items as a step reads them."""
    return await runs.record_step(task_id, step, (await runs.view(task_id)).items)
