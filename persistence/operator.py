"""The operator's side of the store: every owner's tasks, for the dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from persistence.db import Pool, read
from persistence.records import JSON
from persistence.sql import q


@dataclass(frozen=True)
class TaskLine:
    """A task as the dashboard's list shows it."""

    task_id: str
    owner: str
    state: str
    goal: str
    status_text: str | None
    metadata: JSON
    created_at: datetime
    status_at: datetime
    updated_at: datetime


class OperatorStore(Protocol):
    async def tasks(
        self, *, state: str | None, owner: str | None, limit: int
    ) -> list[TaskLine]: ...
    async def owners(self) -> list[str]: ...


class PostgresOperatorStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def tasks(self, *, state: str | None, owner: str | None, limit: int) -> list[TaskLine]:
        """Waiting tasks first, then the most recently changed."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("operator_tasks"), {"state": state, "owner": owner, "limit": limit}
            )
            return [TaskLine(**row) for row in await cur.fetchall()]

    async def owners(self) -> list[str]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("operator_owners"))
            return [str(row["owner"]) for row in await cur.fetchall()]
