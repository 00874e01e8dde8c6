"""The monitoring's side of the store: the service's state, read in one statement."""

from __future__ import annotations

from typing import Any, Protocol

from persistence.db import Pool, read
from persistence.sql import q


class MetricsStore(Protocol):
    async def metrics(self) -> dict[str, Any]: ...


class PostgresMetricsStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def metrics(self) -> dict[str, Any]:
        """Counts and sums by state, step, kind (`metrics.sql`)."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("metrics"))
            row = await cur.fetchone()
        return dict(row["metrics"]) if row else {}
