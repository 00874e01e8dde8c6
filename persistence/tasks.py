"""The edge's side of the store: submissions, task reads, follow-ups, cancel, event reads."""

from __future__ import annotations

import base64
import json
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from persistence.cache import TaskReadCache
from persistence.changes import TaskChange, apply_change
from persistence.db import Conn, Pool, create_pool, read, transaction
from persistence.errors import Conflict, NotFound, StoreError
from persistence.records import (
    JSON,
    TERMINAL_STATES,
    ItemRow,
    NewTask,
    Submitted,
    TaskPage,
    TaskRow,
    Transition,
)
from persistence.safe import jsonb
from persistence.sql import q
from persistence.views import continued, fresh, plan_summary, row_json


class CannotContinue(StoreError):
    """The task a continuation names cannot be continued: not_found | not_ended | no_plan."""

    def __init__(
        self, task_id: str, why: str, state: str | None, named_by: str = "referenceTaskIds"
    ) -> None:
        super().__init__(f"task {task_id} cannot be continued: {why}")
        self.task_id, self.why, self.state = task_id, why, state
        self.named_by = named_by  # where the message named it


@dataclass(frozen=True)
class MessageClaim:
    """A messageId already taken: the task it made or was applied to, and a hash of what it
    said (empty for claims older than digests: taken as the same message)."""

    task_id: str
    digest: str

    def says(self, digest: str) -> bool:
        return self.digest in ("", digest)


@dataclass(frozen=True)
class StoredFile:
    media_type: str
    filename: str | None
    body: bytes
    sha256: str


class TaskStore(Protocol):
    """What the A2A edge needs from storage."""

    async def create_task(self, new: NewTask) -> Submitted: ...
    async def message_claim(self, owner: str, message_id: str) -> MessageClaim | None: ...
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
    async def cancel_task(self, task_id: str, owner: str, reason: str) -> TaskRow: ...
    async def task_file(
        self, task_id: str, owner: str, kind: str, name: str
    ) -> StoredFile | None: ...
    async def events_after(self, task_id: str, after: int) -> list[tuple[int, JSON]]: ...
    async def active_tasks(self, owner: str) -> int: ...
    async def created_at(self, task_id: str, owner: str) -> datetime | None: ...
    async def queued_ahead(self, task_id: str) -> int | None: ...


def task_row(row: dict[str, Any]) -> TaskRow:
    """A task row as read (its `status_at` a datetime)."""
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
        status_data=row.get("status_data"),
        segment=row.get("segment") or 0,
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
    """The one real TaskStore. Every public method is one statement or one transaction."""

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

    async def create_task(self, new: NewTask) -> Submitted:
        """The whole submission in one statement (`create_task()` in functions.sql); a
        messageId the owner sent before gives back the task it made, storing nothing. A
        continuation reads the earlier task's items first, in the same transaction, with the
        earlier task locked: its items, as views.continued makes them, are the new plan."""
        if new.continue_from is None:
            return await self._create(new, [fresh(n, i) for n, i in enumerate(new.items)])
        async with self._tx() as conn:
            cur = await conn.execute(
                q("items_to_continue"), {"task_id": new.continue_from, "owner": new.owner}
            )
            row = await cur.fetchone()
            earlier = [ItemRow(**i) for i in (row["items"] if row else None) or []]
            return await self._create(new, [continued(i) for i in earlier], conn)

    async def _create(
        self, new: NewTask, items: list[ItemRow], conn: Conn | None = None
    ) -> Submitted:
        task = {
            "task_id": new.task_id,
            "owner": new.owner,
            "context_id": new.context_id,
            "goal": new.goal,
            "first_message": new.first_message,
            "metadata": new.metadata,
            "budget": new.budget,
            "items": [row_json(i) for i in items],
            "summary": plan_summary(items) if items else None,
            "rejection": new.rejection,
            "message_id": new.message_id or new.task_id,
            "digest": new.digest,
            "policy": new.policy,
            "continue_from": new.continue_from,
            "seed": new.seed,
            "seed_from": new.seed_from,
            "trace_context": new.trace_context,
            "parent_id": new.parent_id,
            "view_of": new.view_of,
            "inputs": [
                {
                    "name": f.name,
                    "media_type": f.media_type,
                    "filename": f.filename,
                    "size": f.size,
                    "sha256": f.sha256,
                    "body": base64.b64encode(f.body).decode() if f.body is not None else None,
                    "url": f.url,
                }
                for f in new.inputs
            ],
        }
        if conn is not None:
            cur = await conn.execute(q("create_task"), {"task": jsonb(task)}, prepare=True)
            row = await cur.fetchone()
        else:
            async with self._read() as one:  # autocommit: the statement is the transaction
                cur = await one.execute(q("create_task"), {"task": jsonb(task)}, prepare=True)
                row = await cur.fetchone()
        assert row is not None and row["task"] is not None
        made = row["task"]
        if "error" in made:
            raise CannotContinue(
                made.get("task_id") or new.continue_from or "",
                made["error"],
                made.get("state"),
                "workspace.fromTask" if new.seed_from else "referenceTaskIds",
            )
        data = made["task"]
        row_made = task_row({**data, "status_at": datetime.fromisoformat(data["status_at"])})
        if not made["repeated"]:
            self._written(new.task_id)
        return Submitted(row_made, repeated=made["repeated"], same_message=made["digest_matches"])

    async def message_claim(self, owner: str, message_id: str) -> MessageClaim | None:
        """The task a message of this owner made or was applied to, and what it said (its
        digest), if it came before."""
        async with self._read() as conn:
            cur = await conn.execute(
                q("message_claim"), {"owner": owner, "message_id": message_id}, prepare=True
            )
            row = await cur.fetchone()
        return MessageClaim(str(row["task_id"]), str(row["digest"])) if row else None

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
            found = task_row(row) if row else None
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
        params = {
            "owner": owner,
            "context_id": context_id,
            "state": state,
            "after": after,
            "cursor_at": cursor_at,
            "cursor_id": cursor_id,
            "limit": page_size + 1,
        }
        # The page by key (kept by the read cache until any task changes), each row from
        # the read cache where it is kept (the same row object GetTask hands out, so its
        # conversions are kept too), the rest read at once: a caller listing again and
        # again reads keys, not whole rows, and while nothing changes not even those.
        cache = self._cache if self._cache is not None and self._cache.enabled else None
        asked = ("keys", tuple(params.items()))
        keys = cache.page(asked) if cache is not None else None
        if keys is None:
            token = cache.page_token() if cache is not None else None
            async with self._read() as conn:
                cur = await conn.execute(q("list_task_keys"), params, prepare=True)
                keys = tuple(await cur.fetchall())
            if cache is not None and token is not None:
                cache.keep_page(asked, token, keys)
        total = keys[0]["total"] if keys else 0
        page = [key["task_id"] for key in keys[:page_size]]
        rows = {t: row for t in page if (row := cache.get(t) if cache else None) is not None}
        missing = [t for t in page if t not in rows]
        if missing:
            rows.update(await self._rows(missing, cache))
        # A task deleted between the two reads (retention) is left out of the page.
        tasks = [rows[t] for t in page if t in rows]
        next_cursor = None
        if len(keys) > page_size:
            last = keys[page_size - 1]
            next_cursor = encode_cursor(last["status_at"], last["task_id"])
        return TaskPage(tasks=tasks, total=total, next_cursor=next_cursor)

    async def _rows(self, ids: list[str], cache: TaskReadCache | None) -> dict[str, TaskRow]:
        """The rows of `ids`, in one statement, kept in the read cache as GetTask keeps its."""
        tokens = {t: cache.begin_read(t) for t in ids} if cache is not None else {}
        found: dict[str, TaskRow] = {}
        try:
            async with self._read() as conn:
                cur = await conn.execute(q("tasks_by_ids"), {"ids": ids}, prepare=True)
                found = {r["task_id"]: task_row(r) for r in await cur.fetchall()}
        finally:
            for task_id, token in tokens.items():
                if cache is not None:
                    cache.end_read(task_id, token, found.get(task_id))
        return found

    async def task_file(self, task_id: str, owner: str, kind: str, name: str) -> StoredFile | None:
        """A file of the task (`input`: the message's; `output`: a result), if the owner's."""
        async with self._read() as conn:
            cur = await conn.execute(
                q("task_file"), {"task_id": task_id, "owner": owner, "kind": kind, "name": name}
            )
            row = await cur.fetchone()
        if row is None or row["body"] is None:
            return None
        return StoredFile(
            media_type=row["media_type"],
            filename=row["filename"],
            body=bytes(row["body"]),
            sha256=row["sha256"],
        )

    async def cancel_task(self, task_id: str, owner: str, reason: str) -> TaskRow:
        async with self._tx() as conn:
            cur = await conn.execute(q("lock_owned_task"), {"task_id": task_id, "owner": owner})
            locked = await cur.fetchone()
            if locked is None:
                raise NotFound(task_id)
            if locked["state"] in TERMINAL_STATES:
                raise Conflict(f"task {task_id} is already {locked['state']}")
            change = TaskChange(
                transitions=[
                    Transition(from_state=locked["state"], to_state="canceled", reason=reason)
                ],
                state="canceled",
                status_text=reason,
            )
            await apply_change(
                conn,
                task_id,
                change,
                seq=locked["transition_seq"],
                event_seq=locked["event_seq"],
            )
            cur = await conn.execute(q("get_task_any_owner"), {"task_id": task_id})
            row = await cur.fetchone()
        self._written(task_id)
        assert row is not None
        return task_row(row)

    async def active_tasks(self, owner: str) -> int:
        """The caller's tasks that have not ended."""
        async with self._read() as conn:
            cur = await conn.execute(q("active_tasks_of_owner"), {"owner": owner}, prepare=True)
            row = await cur.fetchone()
        return int(row["active"]) if row else 0

    async def created_at(self, task_id: str, owner: str) -> datetime | None:
        """When an owner's task was submitted; None if it has no such task."""
        async with self._read() as conn:
            cur = await conn.execute(
                q("task_created_at"), {"task_id": task_id, "owner": owner}, prepare=True
            )
            row = await cur.fetchone()
        return row["created_at"] if row else None

    async def queued_ahead(self, task_id: str) -> int | None:
        """How many runs wait in the queue ahead of the task's; None once a worker took it."""
        async with self._read() as conn:
            cur = await conn.execute(q("queued_ahead"), {"task_id": task_id}, prepare=True)
            row = await cur.fetchone()
        return int(row["ahead"]) if row else None

    async def events_after(self, task_id: str, after: int) -> list[tuple[int, JSON]]:
        async with self._read() as conn:
            cur = await conn.execute(
                q("events_after"), {"task_id": task_id, "after": after}, prepare=True
            )
            return [(r["seq"], r["body"]) for r in await cur.fetchall()]
