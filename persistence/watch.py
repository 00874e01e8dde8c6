"""The supervisor's side of the store: segments to start and runs that stopped moving."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from persistence.changes import TaskChange, apply_change
from persistence.db import Pool, read, transaction
from persistence.records import TERMINAL_STATES, Transition
from persistence.sql import q


class WatchdogStore(Protocol):
    async def fail_task(
        self, task_id: str, reason: str, *, closing_segment: bool = False
    ) -> bool: ...
    async def stuck_tasks(
        self, stuck_after_s: float, max_age_s: float
    ) -> list[tuple[str, str]]: ...
    async def expired_pauses(self) -> list[ExpiredPause]: ...
    async def dead_runs(self) -> list[DeadRun]: ...
    async def orphaned_waits(self, older_than_s: float) -> list[tuple[str, int]]: ...
    async def key_runs_by_task(self, queue: str) -> int: ...
    async def segments_to_start(self, older_than_s: float) -> list[tuple[str, int]]: ...
    async def prune_pushes(self, retention_s: float) -> int: ...
    async def prune_tasks(self, retention_s: float, limit: int) -> list[tuple[str, int]]: ...
    async def missing_tasks(self, task_ids: list[str]) -> list[str]: ...
    async def compact_tasks(self, retention_s: float, limit: int) -> list[tuple[str, int]]: ...


@dataclass(frozen=True)
class DeadRun:
    """A task still worked whose run's workflow the engine ended without it."""

    task_id: str
    segment: int
    workflow_id: str
    status: str  # DBOS's: ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED or CANCELLED
    error: str


@dataclass(frozen=True)
class ExpiredPause:
    task_id: str
    owner: str
    pause_id: str
    on_expiry: str


class PostgresWatchdogStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def stuck_tasks(self, stuck_after_s: float, max_age_s: float) -> list[tuple[str, str]]:
        """(task id, "no_progress" | "max_age") for runs that should be stopped."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("stuck_tasks"), {"stuck_after_s": stuck_after_s, "max_age_s": max_age_s}
            )
            return [(r["task_id"], r["why"]) for r in await cur.fetchall()]

    async def expired_pauses(self) -> list[ExpiredPause]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("expired_pauses"))
            return [
                ExpiredPause(r["task_id"], r["owner"], r["id"], r["on_expiry"])
                for r in await cur.fetchall()
            ]

    async def orphaned_waits(self, older_than_s: float) -> list[tuple[str, int]]:
        """Tasks in input-required with no open request, unchanged for `older_than_s`: each
        with its segment."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("orphaned_waits"), {"older_than_s": older_than_s})
            return [(str(r["task_id"]), int(r["segment"])) for r in await cur.fetchall()]

    async def dead_runs(self) -> list[DeadRun]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("dead_runs"))
            return [
                DeadRun(
                    str(r["task_id"]),
                    int(r["segment"]),
                    str(r["workflow_id"]),
                    str(r["status"]),
                    r["error"],
                )
                for r in await cur.fetchall()
            ]

    async def key_runs_by_task(self, queue: str) -> int:
        """Give `queue`'s runs enqueued without a partition key their task's; how many."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("key_runs_by_task"), {"queue": queue})
            return cur.rowcount

    async def segments_to_start(self, older_than_s: float) -> list[tuple[str, int]]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("segments_to_start"), {"older_than_s": older_than_s})
            return [(r["task_id"], r["segment"]) for r in await cur.fetchall()]

    async def prune_pushes(self, retention_s: float) -> int:
        """Drop delivered push configs of ended tasks idle for `retention_s`; how many."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("prune_pushes"), {"retention_s": retention_s})
            return cur.rowcount

    async def prune_tasks(self, retention_s: float, limit: int) -> list[tuple[str, int]]:
        """Delete up to `limit` tasks ended more than `retention_s` ago, with all their rows;
        each deleted task's id and its last segment (its runs' workflow ids follow)."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("prune_tasks"), {"retention_s": retention_s, "limit": limit})
            return [(str(r["id"]), int(r["segment"])) for r in await cur.fetchall()]

    async def compact_tasks(self, retention_s: float, limit: int) -> list[tuple[str, int]]:
        """Delete the step records, events and push deliveries of up to `limit` tasks ended
        more than `retention_s` ago (the tasks stay); each one's id and last segment."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("compact_tasks"), {"retention_s": retention_s, "limit": limit}
            )
            return [(str(r["id"]), int(r["segment"])) for r in await cur.fetchall()]

    async def missing_tasks(self, task_ids: list[str]) -> list[str]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("missing_tasks"), {"ids": task_ids})
            return [str(r["id"]) for r in await cur.fetchall()]

    async def fail_task(self, task_id: str, reason: str, *, closing_segment: bool = False) -> bool:
        """End a run as failed from outside it (the run notices, stops its effect and closes
        its record; with `closing_segment`, when no run is left to notice, a segment of its
        own is numbered to close it); False if it had ended already."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("lock_task"), {"task_id": task_id})
            locked = await cur.fetchone()
            if locked is None or locked["state"] in TERMINAL_STATES:
                return False
            change = TaskChange(
                transitions=[
                    Transition(from_state=locked["state"], to_state="failed", reason=reason)
                ],
                state="failed",
                status_text=f"Failed: {reason}",
                closing_segment=closing_segment,
            )
            await apply_change(
                conn, task_id, change, seq=locked["transition_seq"], event_seq=locked["event_seq"]
            )
        return True
