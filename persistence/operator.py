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


@dataclass(frozen=True)
class RunNode:
    """A run in a tree of delegations: a task here, or a peer's task (`peer` set)."""

    task_id: str
    depth: int
    state: str
    goal: str
    peer: str | None


class OperatorStore(Protocol):
    async def tasks(
        self, *, state: str | None, owner: str | None, limit: int
    ) -> list[TaskLine]: ...
    async def owners(self) -> list[str]: ...
    async def run_tree(self, task_id: str) -> list[RunNode]: ...


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

    async def run_tree(self, task_id: str) -> list[RunNode]:
        """The runs of the task's tree, each before those it delegated to."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("run_tree"), {"task_id": task_id})
            return [
                RunNode(row["task_id"], row["depth"], row["state"], row["goal"], row["peer"])
                for row in await cur.fetchall()
            ]
