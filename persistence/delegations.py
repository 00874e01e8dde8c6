"""The delegations' side of the store: what the peer watcher, the edge and the engine need to
follow work handed to child runs and peers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from persistence.db import Pool, read
from persistence.records import JSON
from persistence.safe import jsonb
from persistence.sql import q


@dataclass(frozen=True)
class OpenDelegation:
    task_id: str
    id: str
    peer: str | None
    remote_id: str | None
    parent_state: str
    child_id: str | None = None
    state: str = "pending"
    child_owner: str | None = None
    child_segment: int | None = None


@dataclass(frozen=True)
class PeerAnswer:
    """An answer a person gave here to a peer's question, until the peer takes it."""

    task_id: str
    delegation_id: str
    pause_id: str
    message_id: str
    approval: JSON
    state: str  # pending | sent | refused
    tries: int
    peer: str | None
    remote_id: str | None


class DelegationStore(Protocol):
    async def changed(
        self, task_id: str, delegation_id: str, *, state: str, request: JSON | None,
        result: JSON | None,
    ) -> int | None: ...  # fmt: skip
    async def open_peer_delegations(
        self, older_than_s: float, limit: int
    ) -> list[OpenDelegation]: ...
    async def delegation(self, task_id: str, delegation_id: str) -> OpenDelegation | None: ...
    async def parent_to_wake(self, child_id: str) -> tuple[str, int] | None: ...
    async def open_delegates(self, task_id: str) -> list[OpenDelegation]: ...
    async def end(self, task_id: str, delegation_id: str, result: JSON) -> None: ...
    async def touch(self, task_id: str, delegation_id: str) -> None: ...
    async def queue_answer(
        self, task_id: str, delegation_id: str, pause_id: str, *, message_id: str,
        approval: JSON,
    ) -> PeerAnswer | None: ...  # fmt: skip
    async def answers_to_send(self, older_than_s: float, limit: int) -> list[PeerAnswer]: ...
    async def pending_answers(self, task_id: str, delegation_id: str) -> list[PeerAnswer]: ...
    async def answer_sent(self, task_id: str, pause_id: str, remote_state: str) -> None: ...
    async def answer_failed(self, task_id: str, pause_id: str, error: str) -> None: ...
    async def answer_refused(self, task_id: str, pause_id: str, error: str) -> None: ...


class PostgresDelegationStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def changed(
        self, task_id: str, delegation_id: str, *, state: str, request: JSON | None,
        result: JSON | None,
    ) -> int | None:  # fmt: skip
        """What the delegate did, on its parent (see `delegation_changed()`); the parent's
        segment to start when it goes on."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("delegation_changed"),
                {
                    "task_id": task_id,
                    "id": delegation_id,
                    "state": state,
                    "request": jsonb(request) if request is not None else None,
                    "result": jsonb(result) if result is not None else None,
                },
            )
            row = await cur.fetchone()
        segment = (row["outcome"] or {}).get("segment") if row else None
        return int(segment) if segment is not None else None

    async def open_peer_delegations(self, older_than_s: float, limit: int) -> list[OpenDelegation]:
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("open_peer_delegations"), {"older_than_s": older_than_s, "limit": limit}
            )
            return [OpenDelegation(**row) for row in await cur.fetchall()]

    async def delegation(self, task_id: str, delegation_id: str) -> OpenDelegation | None:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("get_delegation"), {"task_id": task_id, "id": delegation_id})
            row = await cur.fetchone()
        return OpenDelegation(**row) if row else None

    async def parent_to_wake(self, child_id: str) -> tuple[str, int] | None:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("parent_to_wake"), {"child_id": child_id})
            row = await cur.fetchone()
        return (str(row["id"]), int(row["segment"])) if row else None

    async def open_delegates(self, task_id: str) -> list[OpenDelegation]:
        """The delegations `task_id` still waits on (a child run's owner and segment too)."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("open_delegates"), {"task_id": task_id})
            return [OpenDelegation(**row) for row in await cur.fetchall()]

    async def end(self, task_id: str, delegation_id: str, result: JSON) -> None:
        async with read(self._pool) as conn:
            await conn.execute(
                q("end_delegation"),
                {"task_id": task_id, "id": delegation_id, "result": jsonb(result)},
            )

    async def touch(self, task_id: str, delegation_id: str) -> None:
        async with read(self._pool) as conn:
            await conn.execute(q("touch_delegation"), {"task_id": task_id, "id": delegation_id})

    async def queue_answer(
        self, task_id: str, delegation_id: str, pause_id: str, *, message_id: str,
        approval: JSON,
    ) -> PeerAnswer | None:  # fmt: skip
        """The answer to send, kept (once per request: a step run again finds it as it is)."""
        params = {
            "task_id": task_id,
            "delegation_id": delegation_id,
            "pause_id": pause_id,
            "message_id": message_id,
            "approval": jsonb(approval),
        }
        async with read(self._pool) as conn:
            cur = await conn.execute(q("queue_answer"), params)
            row = await cur.fetchone()
        return PeerAnswer(**row) if row else None

    async def answers_to_send(self, older_than_s: float, limit: int) -> list[PeerAnswer]:
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("answers_to_send"), {"older_than_s": older_than_s, "limit": limit}
            )
            return [PeerAnswer(**row) for row in await cur.fetchall()]

    async def pending_answers(self, task_id: str, delegation_id: str) -> list[PeerAnswer]:
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("pending_answers_of"), {"task_id": task_id, "delegation_id": delegation_id}
            )
            return [PeerAnswer(**row) for row in await cur.fetchall()]

    async def answer_sent(self, task_id: str, pause_id: str, remote_state: str) -> None:
        await self._answer("answer_sent", task_id, pause_id, remote_state=remote_state)

    async def answer_failed(self, task_id: str, pause_id: str, error: str) -> None:
        await self._answer("answer_failed", task_id, pause_id, error=error)

    async def answer_refused(self, task_id: str, pause_id: str, error: str) -> None:
        """Not to be sent again; the person reads why on the task (see the SQL function
        `delegation_answer_refused()`)."""
        await self._answer("answer_refused", task_id, pause_id, error=error)

    async def _answer(self, query: str, task_id: str, pause_id: str, **values: str) -> None:
        async with read(self._pool) as conn:
            await conn.execute(q(query), {"task_id": task_id, "pause_id": pause_id, **values})
