"""Replies to a task: a decision on its pending request, or a steering note for its model.

Each is one statement (`answer_pause()` / `add_note()` in functions.sql): the message kept
once under its messageId, the row that records the reply, the task's change and its events.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from persistence.cache import TaskReadCache
from persistence.db import Pool, read
from persistence.records import JSON, TaskRow
from persistence.safe import jsonb
from persistence.sql import q
from persistence.tasks import task_row


@dataclass(frozen=True)
class Reply:
    owner: str
    decision: str
    approval_id: str | None = None  # None: whatever is pending
    note: str | None = None
    decided_by: str | None = None
    how: str = "reply"  # reply | expired
    budget: JSON | None = None  # limits an approval raises (checked against the caps)
    message: JSON | None = None
    message_id: str | None = None
    digest: str = ""
    if_generation: int | None = None  # applied only if the task is still at this generation


@dataclass(frozen=True)
class Note:
    """A steering note for a working task, as its message carried it."""

    owner: str
    text: str
    message: JSON
    message_id: str
    digest: str
    if_generation: int | None = None  # applied only if the task is still at this generation


@dataclass(frozen=True)
class Answered:
    """resumed | repeat | none_pending | unknown | decided | bad_decision | missing | stale
    (the task has moved past `if_generation`: it is at `generation`)."""

    result: str
    row: TaskRow | None = None
    pause: JSON | None = None  # the request the reply was about (when there is one)
    pending: str | None = None  # the request that is pending, if another
    segment: int = 0  # the segment to start when resumed
    # A child run that got the answer too (a delegate's question answered on its parent):
    # its segment to start.
    forwarded: tuple[str, int] | None = None
    generation: int = 0


@dataclass(frozen=True)
class Noted:
    """noted | repeat | not_working | missing | stale (as `Answered`)."""

    result: str
    row: TaskRow | None = None
    seq: int = 0
    generation: int = 0


class ReplyStore(Protocol):
    """What the edge needs to apply a reply."""

    async def answer(self, task_id: str, reply: Reply) -> Answered: ...
    async def note(self, task_id: str, note: Note) -> Noted: ...


def task_from_json(data: Any) -> TaskRow | None:
    if data is None:
        return None
    return task_row({**data, "status_at": datetime.fromisoformat(data["status_at"])})


class PostgresReplyStore:
    def __init__(self, pool: Pool, cache: TaskReadCache | None = None) -> None:
        self._pool = pool
        self._cache = cache

    async def _call(self, query: str, task_id: str, payload: JSON) -> JSON:
        async with read(self._pool) as conn:  # autocommit: the statement is the transaction
            cur = await conn.execute(
                q(query),
                {"task_id": task_id, "payload": jsonb(payload)},
            )
            row = await cur.fetchone()
        assert row is not None
        result: JSON = row["result"]
        if self._cache is not None:
            self._cache.invalidate(task_id)
        return result

    async def answer(self, task_id: str, reply: Reply) -> Answered:
        got = await self._call(
            "answer_pause",
            task_id,
            {
                "owner": reply.owner,
                "approval_id": reply.approval_id,
                "decision": reply.decision,
                "note": reply.note,
                "decided_by": reply.decided_by,
                "how": reply.how,
                "budget": reply.budget,
                "message": reply.message,
                "message_id": reply.message_id,
                "digest": reply.digest,
                **({} if reply.if_generation is None else {"if_generation": reply.if_generation}),
            },
        )
        forwarded = got.get("forwarded")
        return Answered(
            result=got["result"],
            row=task_from_json(got.get("task")),
            pause=got.get("pause"),
            pending=got.get("pending"),
            segment=int(got.get("segment") or 0),
            forwarded=(str(forwarded["task_id"]), int(forwarded["segment"])) if forwarded else None,
            generation=int(got.get("generation") or 0),
        )

    async def note(self, task_id: str, note: Note) -> Noted:
        payload: JSON = {
            "owner": note.owner,
            "text": note.text,
            "message": note.message,
            "message_id": note.message_id,
            "digest": note.digest,
        }
        if note.if_generation is not None:
            payload["if_generation"] = note.if_generation
        got = await self._call("add_note", task_id, payload)
        return Noted(
            result=got["result"],
            row=task_from_json(got.get("task")),
            seq=int(got.get("seq") or 0),
            generation=int(got.get("generation") or 0),
        )
