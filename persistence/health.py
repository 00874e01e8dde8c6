"""Readiness reads: does the database answer, and at which schema version."""

from __future__ import annotations

from persistence.db import Pool, read
from persistence.errors import StoreUnavailable
from persistence.sql import q


class DatabaseHealth:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def ping(self, timeout_s: float = 2.0) -> bool:
        """True if the database answers within `timeout_s` (readiness must not hang)."""
        try:
            async with read(self._pool, timeout_s=timeout_s) as conn:
                await conn.execute(q("ping"))
        except StoreUnavailable:
            return False
        return True

    async def schema_version(self) -> int:
        """The newest migration applied (readiness asks on every probe: a pooled read)."""
        async with read(self._pool, timeout_s=2.0) as conn:
            cur = await conn.execute(q("schema_version"), prepare=True)
            row = await cur.fetchone()
        return int(row["version"]) if row else 0
