"""PostgreSQL store for tasks, items, transitions, events and effects (psycopg 3 + pool)."""

from __future__ import annotations

import base64
import dataclasses
import json
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol

from psycopg.types.json import Jsonb

from persistence.cache import TaskReadCache
from persistence.changes import apply_change, charge_step, insert_items
from persistence.db import Conn, Pool, create_pool, read, transaction
from persistence.errors import Conflict, NotFound, StoreError, StoreUnavailable
from persistence.records import (
    JSON,
    TERMINAL_STATES,
    Checkpoint,
    ItemRow,
    NewTask,
    StepOutcome,
    StepRecord,
    TaskPage,
    TaskRow,
    Transition,
    TransitionRow,
)
from persistence.sql import q


class TaskStore(Protocol):
    """What the edge and the run engine need from storage."""

    async def create_task(self, new: NewTask) -> TaskRow: ...
    async def get_task(self, task_id: str, owner: str | None) -> TaskRow | None: ...
    async def list_tasks(
        self,
        owner: str,
        *,
        context_id: str | None,
        state: str | None,
        after: datetime | None,
        page_size: int,
        cursor: str | None,
    ) -> TaskPage: ...
    async def append_message(self, task_id: str, owner: str, message: JSON) -> TaskRow: ...
    async def cancel_task(self, task_id: str, owner: str, reason: str) -> TaskRow: ...
    async def events_after(self, task_id: str, after: int) -> list[tuple[int, JSON]]: ...
    async def get_items(self, task_id: str) -> list[ItemRow]: ...
    async def get_transitions(self, task_id: str) -> list[TransitionRow]: ...
    async def record_step(self, task_id: str, record: StepRecord) -> StepOutcome: ...
    async def submitted_task_ids(self, older_than_s: float) -> list[str]: ...
    async def workspace_record(self, task_id: str) -> tuple[str | None, str | None]: ...
    async def get_checkpoints(self, task_id: str) -> list[Checkpoint]: ...
    async def task_goal(self, task_id: str) -> str | None: ...
    async def stuck_tasks(
        self, stuck_after_s: float, max_age_s: float
    ) -> list[tuple[str, str]]: ...


def _task(row: dict[str, Any]) -> TaskRow:
    return TaskRow(
        task_id=row["task_id"],
        owner=row["owner"],
        context_id=row["context_id"],
        state=row["state"],
        status_text=row["status_text"],
        status_at=row["status_at"],
        history=row["history"],
        metadata=row["metadata"],
        plan=row["plan"],
        report=row["report"],
        event_seq=row["event_seq"],
    )


def encode_cursor(status_at: datetime, task_id: str) -> str:
    raw = json.dumps([status_at.isoformat(), task_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        at, task_id = json.loads(base64.urlsafe_b64decode(padded))
        return datetime.fromisoformat(at), str(task_id)
    except (ValueError, TypeError) as exc:
        raise StoreError(f"page token {cursor!r} is not one this server issued") from exc


class PostgresTaskStore:
    """The one real TaskStore. Every public method is one transaction."""

    def __init__(self, pool: Pool, cache: TaskReadCache | None = None) -> None:
        self._pool = pool
        self._cache = cache

    def _written(self, task_id: str) -> None:
        # Our own writes drop the cached row at once; other processes' writes via NOTIFY.
        if self._cache is not None:
            self._cache.invalidate(task_id)

    @classmethod
    def create_pool(cls, conninfo: str, *, max_size: int = 10) -> Pool:
        return create_pool(conninfo, max_size=max_size)

    def _tx(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    def _read(self) -> AbstractAsyncContextManager[Conn]:
        return read(self._pool)

    async def ping(self, timeout_s: float = 2.0) -> bool:
        """True if the database answers within `timeout_s` (readiness must not hang)."""
        try:
            async with read(self._pool, timeout_s=timeout_s) as conn:
                await conn.execute(q("ping"))
        except StoreUnavailable:
            return False
        return True

    async def create_task(self, new: NewTask) -> TaskRow:
        # Pipeline mode: the dozen statements of a submission travel in one round trip.
        async with self._tx() as conn, conn.pipeline():
            await conn.execute(
                q("insert_task"),
                {
                    "task_id": new.task_id,
                    "owner": new.owner,
                    "context_id": new.context_id,
                    "status_text": "Accepted; waiting for a worker."
                    if new.rejection is None
                    else None,
                    "goal": new.goal,
                    "first_message": Jsonb(new.first_message),
                    "metadata": Jsonb(new.metadata),
                    "budget": Jsonb(new.budget),
                },
                prepare=True,
            )
            await conn.execute(q("refresh_budget"), {"task_id": new.task_id})
            await insert_items(conn, new.task_id, new.items)
            transitions = [Transition(to_state="submitted", reason="task received")]
            state, text = "submitted", "Accepted; waiting for a worker."
            if new.rejection is not None:
                transitions.append(
                    Transition(from_state="submitted", to_state="rejected", reason=new.rejection)
                )
                state, text = "rejected", new.rejection
            await apply_change(
                conn,
                new.task_id,
                transitions=transitions,
                task_state=state,
                status_text=text,
                seq=0,
                event_seq=0,
                items_changed=bool(new.items),
            )
            cur = await conn.execute(q("get_task_any_owner"), {"task_id": new.task_id})
            row = await cur.fetchone()
        self._written(new.task_id)
        assert row is not None
        return _task(row)

    async def get_task(self, task_id: str, owner: str | None) -> TaskRow | None:
        cache = self._cache
        cached = cache.get(task_id) if cache is not None else None
        if cached is not None:
            return cached if owner is None or cached.owner == owner else None
        token = cache.begin_read(task_id) if cache is not None else (0, 0)
        found: TaskRow | None = None
        try:
            async with self._read() as conn:
                cur = await conn.execute(
                    q("get_task_any_owner"), {"task_id": task_id}, prepare=True
                )
                row = await cur.fetchone()
            found = _task(row) if row else None
        finally:
            if cache is not None:
                cache.end_read(task_id, token, found)
        if found is None or (owner is not None and found.owner != owner):
            return None
        return found

    async def list_tasks(
        self,
        owner: str,
        *,
        context_id: str | None,
        state: str | None,
        after: datetime | None,
        page_size: int,
        cursor: str | None,
    ) -> TaskPage:
        cursor_at, cursor_id = decode_cursor(cursor) if cursor else (None, None)
        async with self._read() as conn:
            cur = await conn.execute(
                q("list_tasks"),
                {
                    "owner": owner,
                    "context_id": context_id,
                    "state": state,
                    "after": after,
                    "cursor_at": cursor_at,
                    "cursor_id": cursor_id,
                    "limit": page_size + 1,
                },
                prepare=True,
            )
            rows = await cur.fetchall()
        total = rows[0]["total"] if rows else 0
        tasks = [_task(r) for r in rows[:page_size]]
        next_cursor = None
        if len(rows) > page_size:
            last = tasks[-1]
            next_cursor = encode_cursor(last.status_at, last.task_id)
        return TaskPage(tasks=tasks, total=total, next_cursor=next_cursor)

    async def append_message(self, task_id: str, owner: str, message: JSON) -> TaskRow:
        async with self._tx() as conn:
            cur = await conn.execute(q("lock_owned_task"), {"task_id": task_id, "owner": owner})
            locked = await cur.fetchone()
            if locked is None:
                raise NotFound(task_id)
            if locked["state"] in TERMINAL_STATES:
                raise Conflict(f"task {task_id} is {locked['state']}")
            await conn.execute(q("append_history"), {"task_id": task_id, "message": Jsonb(message)})
            cur = await conn.execute(q("get_task_any_owner"), {"task_id": task_id})
            row = await cur.fetchone()
        self._written(task_id)
        assert row is not None
        return _task(row)

    async def cancel_task(self, task_id: str, owner: str, reason: str) -> TaskRow:
        async with self._tx() as conn:
            cur = await conn.execute(q("lock_owned_task"), {"task_id": task_id, "owner": owner})
            locked = await cur.fetchone()
            if locked is None:
                raise NotFound(task_id)
            if locked["state"] in TERMINAL_STATES:
                raise Conflict(f"task {task_id} is already {locked['state']}")
            await apply_change(
                conn,
                task_id,
                transitions=[
                    Transition(from_state=locked["state"], to_state="canceled", reason=reason)
                ],
                task_state="canceled",
                status_text=reason,
                seq=locked["transition_seq"],
                event_seq=locked["event_seq"],
                items_changed=False,
            )
            cur = await conn.execute(q("get_task_any_owner"), {"task_id": task_id})
            row = await cur.fetchone()
        self._written(task_id)
        assert row is not None
        return _task(row)

    async def events_after(self, task_id: str, after: int) -> list[tuple[int, JSON]]:
        async with self._read() as conn:
            cur = await conn.execute(
                q("events_after"), {"task_id": task_id, "after": after}, prepare=True
            )
            return [(r["seq"], r["body"]) for r in await cur.fetchall()]

    async def get_items(self, task_id: str) -> list[ItemRow]:
        async with self._read() as conn:
            cur = await conn.execute(q("get_items"), {"task_id": task_id}, prepare=True)
            return [ItemRow(**r) for r in await cur.fetchall()]

    async def get_transitions(self, task_id: str) -> list[TransitionRow]:
        async with self._read() as conn:
            cur = await conn.execute(q("get_transitions"), {"task_id": task_id})
            return [TransitionRow(**r) for r in await cur.fetchall()]

    async def record_step(self, task_id: str, record: StepRecord) -> StepOutcome:
        async with self._tx() as conn:
            cur = await conn.execute(q("lock_task"), {"task_id": task_id}, prepare=True)
            locked = await cur.fetchone()
            if locked is None:
                raise NotFound(task_id)
            cur = await conn.execute(q("lock_effect"), {"key": record.effect_key}, prepare=True)
            effect = await cur.fetchone()
            if effect is not None and effect["status"] == "completed":
                return StepOutcome(
                    result=effect["result"], replayed=True, task_state=locked["state"]
                )
            if record.charge is not None:
                await charge_step(conn, task_id, record.effect_key, record.charge)
            if locked["state"] in TERMINAL_STATES:
                # Canceled (or stopped) while the step ran: keep the evidence, change nothing else.
                await self._complete_effect(conn, task_id, record)
                return StepOutcome(result=record.result, replayed=False, task_state=locked["state"])
            await insert_items(conn, task_id, record.new_items)
            if record.item is not None:
                await conn.execute(
                    q("update_item"),
                    {
                        "task_id": task_id,
                        "item_id": record.item.item_id,
                        "status": record.item.status,
                        "attempts": record.item.attempts,
                        "evidence": Jsonb(record.item.evidence) if record.item.evidence else None,
                        "commit_sha": record.item.commit_sha,
                        "failures": record.item.failures,
                    },
                    prepare=True,
                )
            if record.metadata_patch:
                await conn.execute(
                    q("merge_metadata"),
                    {"task_id": task_id, "patch": Jsonb(record.metadata_patch)},
                )
            text = record.status_text if record.status_text is not None else locked["status_text"]
            if record.fingerprint is not None:
                await conn.execute(
                    q("set_fingerprint"),
                    {"task_id": task_id, "fingerprint": record.fingerprint},
                    prepare=True,
                )
            if record.checkpoint is not None:
                params = {"task_id": task_id, "sha": record.checkpoint.sha}
                await conn.execute(
                    q("add_checkpoint"), {**params, "bundle": record.checkpoint.bundle}
                )
                await conn.execute(q("set_checkpoint_sha"), params)
            transitions = [
                dataclasses.replace(t, from_state=locked["state"])
                if t.item_id is None and t.from_state is None
                else t
                for t in record.transitions
            ]
            await apply_change(
                conn,
                task_id,
                transitions=transitions,
                task_state=record.task_state,
                status_text=text,
                seq=locked["transition_seq"],
                event_seq=locked["event_seq"],
                items_changed=record.item is not None or bool(record.new_items),
                report=record.report,
            )
            await self._complete_effect(conn, task_id, record)
            new_state = record.task_state or locked["state"]
        self._written(task_id)
        return StepOutcome(result=record.result, replayed=False, task_state=new_state)

    async def _complete_effect(self, conn: Conn, task_id: str, record: StepRecord) -> None:
        item_id = record.item.item_id if record.item else None
        attempt = record.item.attempts if record.item else None
        await conn.execute(
            q("complete_effect"),
            {
                "key": record.effect_key,
                "task_id": task_id,
                "item_id": item_id,
                "attempt": attempt,
                "step": record.step,
                "result": Jsonb(record.result),
            },
            prepare=True,
        )

    async def submitted_task_ids(self, older_than_s: float) -> list[str]:
        async with self._read() as conn:
            cur = await conn.execute(q("submitted_tasks"), {"older_than_s": older_than_s})
            return [r["task_id"] for r in await cur.fetchall()]

    async def workspace_record(self, task_id: str) -> tuple[str | None, str | None]:
        """The workspace fingerprint after the last recorded step, and the last checkpoint."""
        async with self._read() as conn:
            cur = await conn.execute(q("workspace_record"), {"task_id": task_id}, prepare=True)
            row = await cur.fetchone()
        if row is None:
            raise NotFound(task_id)
        return row["workspace_fingerprint"], row["checkpoint_sha"]

    async def get_checkpoints(self, task_id: str) -> list[Checkpoint]:
        async with self._read() as conn:
            cur = await conn.execute(q("get_checkpoints"), {"task_id": task_id})
            return [
                Checkpoint(sha=r["sha"], bundle=bytes(r["bundle"])) for r in await cur.fetchall()
            ]

    async def stuck_tasks(self, stuck_after_s: float, max_age_s: float) -> list[tuple[str, str]]:
        """(task id, "no_progress" | "max_age") for runs that should be stopped."""
        async with self._read() as conn:
            cur = await conn.execute(
                q("stuck_tasks"), {"stuck_after_s": stuck_after_s, "max_age_s": max_age_s}
            )
            return [(r["task_id"], r["why"]) for r in await cur.fetchall()]

    async def task_goal(self, task_id: str) -> str | None:
        async with self._read() as conn:
            cur = await conn.execute(q("task_goal"), {"task_id": task_id})
            row = await cur.fetchone()
        return str(row["goal"]) if row else None

    async def schema_version(self) -> int:
        """The newest migration applied (readiness asks on every probe: a pooled read)."""
        async with read(self._pool, timeout_s=2.0) as conn:
            cur = await conn.execute(q("schema_version"), prepare=True)
            row = await cur.fetchone()
        return int(row["version"]) if row else 0
