"""The run starter's side of the store: tasks sent whose run no worker has enqueued yet."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from persistence.db import Pool, transaction
from persistence.sql import q


class StartStore(Protocol):
    async def start_unstarted(self, start: Callable[[str], Awaitable[None]], limit: int) -> int:
        """Call `start` for up to `limit` tasks sent and not enqueued, oldest first, each
        held from other starters until all of them are started; how many there were."""
        ...


class PostgresStartStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def start_unstarted(self, start: Callable[[str], Awaitable[None]], limit: int) -> int:
        """The tasks stay locked (`FOR UPDATE SKIP LOCKED`) while `start` enqueues them, so a
        second worker's starter passes them by; when the transaction ends their workflows
        exist, and no starter sees them again. If `start` fails, the transaction rolls back
        and the tasks wait for the next look."""
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("unstarted_tasks"), {"limit": limit}, prepare=True)
            task_ids = [r["task_id"] for r in await cur.fetchall()]
            for task_id in task_ids:
                await start(task_id)
        return len(task_ids)
