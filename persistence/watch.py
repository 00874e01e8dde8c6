"""The supervisor's side of the store: lost enqueues and runs that stopped moving."""

from __future__ import annotations

from typing import Protocol

from persistence.db import Pool, read
from persistence.sql import q


class WatchdogStore(Protocol):
    async def submitted_task_ids(self, older_than_s: float) -> list[str]: ...
    async def stuck_tasks(
        self, stuck_after_s: float, max_age_s: float
    ) -> list[tuple[str, str]]: ...


class PostgresWatchdogStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def submitted_task_ids(self, older_than_s: float) -> list[str]:
        """Tasks still `submitted` after `older_than_s`: their enqueue may have been lost."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("submitted_tasks"), {"older_than_s": older_than_s})
            return [r["task_id"] for r in await cur.fetchall()]

    async def stuck_tasks(self, stuck_after_s: float, max_age_s: float) -> list[tuple[str, str]]:
        """(task id, "no_progress" | "max_age") for runs that should be stopped."""
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("stuck_tasks"), {"stuck_after_s": stuck_after_s, "max_age_s": max_age_s}
            )
            return [(r["task_id"], r["why"]) for r in await cur.fetchall()]
