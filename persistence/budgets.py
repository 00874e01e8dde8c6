"""Budget reads and alerts (the charges themselves are written with their steps)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from persistence.changes import TaskChange, apply_change
from persistence.db import Pool, read, transaction
from persistence.records import JSON, TERMINAL_STATES
from persistence.safe import jsonb
from persistence.sql import q


class Budgets(Protocol):
    async def budget_status(self, task_id: str, exclude_key: str = "") -> JSON: ...
    async def record_alerts(
        self, task_id: str, crossings: Sequence[tuple[str, int, str]]
    ) -> list[tuple[str, int]]: ...


class PostgresBudgets:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def budget_status(self, task_id: str, exclude_key: str = "") -> JSON:
        """Used and limit per budget dimension, from the charges (see budget_status())."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("budget_status"),
                {"task_id": task_id, "exclude_key": exclude_key},
                prepare=True,
            )
            row = await cur.fetchone()
        return dict(row["status"]) if row and row["status"] else {}

    async def record_alerts(
        self, task_id: str, crossings: Sequence[tuple[str, int, str]]
    ) -> list[tuple[str, int]]:
        """Record (dimension, threshold, text) crossings not seen before, each exactly once;
        new ones become the task's status message and join metadata.budget_alerts."""
        new: list[tuple[str, int]] = []
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("lock_task"), {"task_id": task_id})
            locked = await cur.fetchone()
            if locked is None or locked["state"] in TERMINAL_STATES:
                return new
            texts = []
            for dimension, threshold, text in crossings:
                cur = await conn.execute(
                    q("insert_alert"),
                    {"task_id": task_id, "dimension": dimension, "threshold": threshold},
                )
                if await cur.fetchone():
                    new.append((dimension, threshold))
                    texts.append(text)
            if new:
                alerts = [{"dimension": d, "threshold_pct": t} for d, t in new]
                await conn.execute(
                    q("append_alerts"), {"task_id": task_id, "alerts": jsonb(alerts)}
                )
                await apply_change(
                    conn,
                    task_id,
                    TaskChange(state=locked["state"], status_text=" ".join(texts)),
                    seq=locked["transition_seq"],
                    event_seq=locked["event_seq"],
                )
        return new
