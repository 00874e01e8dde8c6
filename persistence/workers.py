"""Worker heartbeats: who is alive, who holds an executor id, whose runs need a new home."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeGuard

from persistence.db import Pool, read, transaction
from persistence.errors import Conflict
from persistence.sql import q


@dataclass(frozen=True)
class WorkerIdentity:
    executor_id: str
    role: str
    host: str
    pid: int


def _pid_alive(pid: int) -> bool:
    """True if `pid` is a running process here (a zombie is a dead one not yet reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# A process killed a moment ago may not have finished exiting (a large process under load took
# longer than a restart that forks from a warm parent): a claim held by a live process of
# this host waits this long for it to go before it is refused.
EXITING_S = 3.0


async def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while _pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.05)
    return True


class WorkerRegistry:
    def __init__(self, pool: Pool, me: WorkerIdentity, timeout_s: float) -> None:
        self._pool = pool
        self.me = me
        self.timeout_s = timeout_s

    def _params(self) -> dict[str, object]:
        return {
            "executor_id": self.me.executor_id,
            "host": self.me.host,
            "pid": self.me.pid,
            "role": self.me.role,
            "timeout_s": self.timeout_s,
        }

    def _held_by_another(self, row: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
        """The claim read is live and is not this process's."""
        return (
            row is not None
            and bool(row["fresh"])
            and (row["host"], row["pid"]) != (self.me.host, self.me.pid)
        )

    async def register(self) -> None:
        """Claim our executor id; refuse it while another live process holds it."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("get_worker"), self._params())
            held = await cur.fetchone()
        if self._held_by_another(held) and held["host"] == self.me.host:
            await _gone_within(held["pid"], EXITING_S)
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("get_worker"), self._params())
            row = await cur.fetchone()
            if self._held_by_another(row):
                same_host_dead = row["host"] == self.me.host and not _pid_alive(row["pid"])
                if not same_host_dead:
                    raise Conflict(
                        f"executor id {self.me.executor_id!r} is in use by pid {row['pid']} on "
                        f"{row['host']} (heartbeat {row['heartbeat_at']:%H:%M:%S}); give this "
                        "process another --executor-id, or wait "
                        f"{self.timeout_s:g} s if that process is gone"
                    )
            await conn.execute(q("upsert_worker"), self._params())

    async def heartbeat(self) -> bool:
        """Refresh our heartbeat; False if another process has claimed our executor id.

        One autocommit statement: the row is locked only while the server runs it, so a
        process frozen at any moment (SIGSTOP, a VM stall) never holds its row locked."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("heartbeat"), self._params(), prepare=True)
            return await cur.fetchone() is not None

    async def mark_stopped(self) -> None:
        """A clean exit: let a live worker take over our runs now, not after the timeout."""
        async with read(self._pool) as conn:
            await conn.execute(q("mark_stopped"), self._params())

    async def is_fresh(self) -> bool:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("get_worker"), self._params())
            row = await cur.fetchone()
        return bool(row and row["fresh"] and row["pid"] == self.me.pid)

    async def hand_over_dead(self, resume: Callable[[str], Awaitable[int]]) -> dict[str, int]:
        """Hand the runs of every executor whose heartbeat timed out to `resume`.

        Only the process holding the janitor lock does this. A dead executor's row is deleted
        in the same transaction, after `resume` returned, so a janitor that dies half-way leaves
        the row for the next one; `resume` must only touch runs still owned by that executor.
        """
        handed: dict[str, int] = {}
        async with transaction(self._pool) as conn:
            # A janitor frozen half-way must not hold the lock (and the rows) for good: the
            # server ends its session once it idles in this transaction past the timeout.
            await conn.execute(
                q("janitor_session_timeout"), {"ms": int(max(self.timeout_s, 5.0) * 1000)}
            )
            cur = await conn.execute(q("try_janitor_lock"))
            locked = await cur.fetchone()
            if not locked or not locked["locked"]:
                return handed
            cur = await conn.execute(q("dead_workers"), self._params())
            for row in await cur.fetchall():
                handed[row["executor_id"]] = await resume(row["executor_id"])
                await conn.execute(q("forget_worker"), {"executor_id": row["executor_id"]})
                await conn.execute(
                    q("record_takeover"),
                    {
                        "dead": row["executor_id"],
                        "by": self.me.executor_id,
                        "runs": handed[row["executor_id"]],
                    },
                )
        return handed
