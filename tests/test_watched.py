"""A background task that dies takes its process with it, and the nanny replaces it.

The supervisor (heartbeats) and the notifier (LISTEN, cache invalidation) are killed from
inside by an injected fault while a run is in flight: the process exits, a new one takes its
place under the same executor id, and the run completes with nothing done twice but the
step that was in flight, which re-runs under its own key.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, plan_message, send, wait_for
from tests.support.processes import StartAgent
from tests.test_restart import assert_transitions_sound, ledger_items

pytestmark = [pytest.mark.slow, pytest.mark.processes]

WHAT = {
    "supervisor": "the supervisor (heartbeats, janitor, watchdog) died",
    "notifier": "the event listener (LISTEN, cache invalidation) died",
}


def worker_pid(database_url: str, executor_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT pid FROM workers WHERE executor_id = %s", (executor_id,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("component", ["supervisor", "notifier"])
async def test_a_dying_background_task_replaces_the_process(
    start_agent: StartAgent, database_url: str, tmp_path: Path, component: str
) -> None:
    fault = tmp_path / "fault"
    ledger = tmp_path / "ledger.txt"
    executor = f"fault-{component}"
    server = start_agent(
        "serve",
        executor,
        A2A_AGENT_FAULT_FILE=str(fault),
        A2A_AGENT_HEARTBEAT_TIMEOUT_S="3",  # a beat every second
    )
    before = worker_pid(database_url, executor)
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 1.5)))
        key = f"{task.id}:i1:1:run"
        deadline = time.monotonic() + 30
        while key not in (ledger.read_text() if ledger.exists() else ""):
            assert time.monotonic() < deadline, "item i1 never started"
            await asyncio.sleep(0.05)
        fault.write_text(component)  # item i1's command is running
        finished = await wait_for(client, task.id, timeout=60)
    assert finished.status.state == TaskState.TASK_STATE_COMPLETED, finished.status.message
    assert not fault.exists(), "the fault never fired"
    log = server.log()
    assert WHAT[component] in log and "InjectedFault" in log
    assert "asked to be replaced; starting a new one" in log
    assert worker_pid(database_url, executor) != before
    assert server.proc is not None and server.proc.poll() is None  # the nanny stays
    counts = Counter(ledger.read_text().split())
    assert counts[f"{task.id}:i0:1:run"] == 1 and counts[f"{task.id}:i2:1:run"] == 1
    assert counts[key] <= 2  # in flight at the exit: re-run under its own key, at most once
    with psycopg.connect(database_url) as conn:
        effect = conn.execute("SELECT status, runs FROM effects WHERE key = %s", (key,)).fetchone()
    assert effect == ("completed", counts[key])
    assert_transitions_sound(database_url, task.id)
