"""The effects ledger: every keyed effect (command, tool call, model call) and its runs.

An effect is completed by the transaction that records its step (`RunStore.record_step`).
This ledger only puts a run on record before it starts, where that costs a commit worth
paying: a re-run after a crash, so that anyone reading sees the run it is on, and the
transition that says so (in progress.md and the task's record) in the same transaction.
"""

from __future__ import annotations

from typing import Any, Protocol

from persistence.changes import TaskChange, apply_change
from persistence.db import Pool, transaction
from persistence.records import EffectRow, Transition
from persistence.sql import q


def _effect(row: dict[str, Any]) -> EffectRow:
    return EffectRow(key=row["key"], status=row["status"], runs=row["runs"], result=row["result"])


class Ledger(Protocol):
    async def start_effect(
        self,
        key: str,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        *,
        runs: int = 1,
        note: Transition | None = None,
    ) -> EffectRow: ...


class PostgresLedger:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def start_effect(
        self,
        key: str,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        *,
        runs: int = 1,
        note: Transition | None = None,
    ) -> EffectRow:
        """Record that run `runs` (at least one more than recorded) of an effect begins, and
        `note` as a transition of the task; a completed effect is returned untouched, with its
        result (and no note)."""
        params = {
            "key": key,
            "task_id": task_id,
            "item_id": item_id,
            "attempt": attempt,
            "step": step,
            "runs": runs,
        }
        async with transaction(self._pool) as conn:
            locked = None
            if note is not None:
                cur = await conn.execute(q("lock_task"), {"task_id": task_id})
                locked = await cur.fetchone()
            cur = await conn.execute(q("start_effect"), params, prepare=True)
            row = await cur.fetchone()
            if row is None:  # the conflict clause skipped a completed effect
                cur = await conn.execute(q("get_effect"), {"key": key})
                row = await cur.fetchone()
            elif note is not None and locked is not None:
                await apply_change(
                    conn,
                    task_id,
                    TaskChange(transitions=[note]),
                    seq=locked["transition_seq"],
                    event_seq=locked["event_seq"],
                )
        assert row is not None
        return _effect(row)
