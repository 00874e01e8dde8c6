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
