"""The operator's side of the store: every owner's tasks, for the dashboard."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from persistence.db import Pool, read
from persistence.records import JSON, TaskRow
from persistence.sql import q
from persistence.tasks import task_row


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


@dataclass(frozen=True)
class NoteLine:
    """A steering note, and who sent it (when the message says)."""

    seq: int
    text: str
    at: datetime
    sent_by: str | None


class OperatorStore(Protocol):
    async def tasks(
        self, *, state: str | None, owner: str | None, limit: int
    ) -> list[TaskLine]: ...
    async def owners(self) -> list[str]: ...
    async def run_tree(self, task_id: str) -> list[RunNode]: ...
    async def task(self, task_id: str) -> TaskRow | None: ...
    async def version(self, task_id: str) -> str: ...
    async def notes(self, task_id: str) -> list[NoteLine]: ...
    async def record(self, task_id: str, reason: str) -> bool: ...


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

    async def task(self, task_id: str) -> TaskRow | None:
        """The task as it is in the database now (never a cached row)."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("operator_task"), {"task_id": task_id})
            row = await cur.fetchone()
        return task_row(row) if row else None

    async def version(self, task_id: str) -> str:
        """A token that changes whenever the task's page would show something new ('' for
        no such task)."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("operator_task_version"), {"task_id": task_id})
            row = await cur.fetchone()
        if row is None:
            return ""
        seen = f"{row['event_seq']}|{row['transition_seq']}|{row['updated_at']}|{row['pushes']}"
        return hashlib.sha256(seen.encode()).hexdigest()[:16]

    async def notes(self, task_id: str) -> list[NoteLine]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("operator_notes"), {"task_id": task_id})
            return [
                NoteLine(r["seq"], r["text"], r["at"], r["sent_by"]) for r in await cur.fetchall()
            ]

    async def record(self, task_id: str, reason: str) -> bool:
        """A transition in the task's state with `reason` (False: no such task)."""
        async with read(self._pool) as conn:  # autocommit: the statement is the transaction
            cur = await conn.execute(q("operator_record"), {"task_id": task_id, "reason": reason})
            return await cur.fetchone() is not None
