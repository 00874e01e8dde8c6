"""An executor id is claimed by one live process at a time (`WorkerRegistry.register`): a
claim held by a process of this host that is still exiting after a kill is waited for, and
one held by a process that lives on is refused, saying by whom."""

from __future__ import annotations

import socket
import subprocess

import pytest

from persistence.db import Pool
from persistence.errors import Conflict
from persistence.workers import EXITING_S, WorkerIdentity, WorkerRegistry


def registry(pool: Pool, pid: int) -> WorkerRegistry:
    me = WorkerIdentity(executor_id="w1", role="worker", host=socket.gethostname(), pid=pid)
    return WorkerRegistry(pool, me, timeout_s=30.0)


async def test_a_claim_of_a_process_still_exiting_is_taken_once_it_is_gone(pool: Pool) -> None:
    # The holder: a process of this host that ends a moment after the new one starts, as
    # one killed just before its replacement forked from a warm parent.
    holder = subprocess.Popen(["sleep", "0.5"])
    try:
        await registry(pool, holder.pid).register()
        successor = registry(pool, holder.pid + 100_000)
        await successor.register()  # waits for the holder instead of refusing
        assert holder.poll() is not None
        assert await successor.heartbeat()
    finally:
        holder.kill()
        holder.wait()


async def test_a_claim_of_a_live_process_is_refused(pool: Pool) -> None:
    holder = subprocess.Popen(["sleep", str(EXITING_S + 30)])
    try:
        await registry(pool, holder.pid).register()
        with pytest.raises(Conflict, match=f"in use by pid {holder.pid}"):
            await registry(pool, holder.pid + 100_000).register()
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()
