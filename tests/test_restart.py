"""Stopping and restarting real processes mid-plan; splitting the API from the workers."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_message, plan_of, send, wait_for
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_row

COMPLETED = TaskState.TASK_STATE_COMPLETED


def ledger_items(count: int, ledger: Path, sleep_s: float) -> list[dict[str, object]]:
    """Items whose run appends its idempotency key to a ledger outside the workspace."""
    return [
        item(
            f"i{n}",
            f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; sleep {sleep_s}; echo {n} > i{n}.txt',
            f"test -f i{n}.txt",
        )
        for n in range(count)
    ]


def wait_items_done(database_url: str, task_id: str, count: int, timeout: float = 60) -> None:
    wait_for_row(
        database_url,
        "SELECT count(*) >= %s FROM items WHERE task_id = %s AND status = 'done'",
        (count, task_id),
        what=f"fewer than {count} items done",
        timeout=timeout,
    )


def assert_transitions_sound(database_url: str, task_id: str) -> None:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT seq, item_id, attempt, from_state, to_state, reason FROM transitions "
            "WHERE task_id = %s ORDER BY seq",
            (task_id,),
        ).fetchall()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    # A change of state happens once; a note that keeps the state (a check passed) says
    # what it is about, so the same note twice is a step recorded twice too.
    changes = Counter(r[1:] if r[3] == r[4] else r[1:5] for r in rows)
    assert max(changes.values()) == 1, f"a transition was recorded twice: {changes}"


@pytest.mark.slow
async def test_sigterm_mid_plan_then_restart_completes_without_rerunning_done_items(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "node-a")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(5, ledger, 0.6)))
    wait_items_done(database_url, task.id, 2)
    assert server.stop() in (0, 143, -15)
    done_before = [line for line in ledger.read_text().split()]

    server = start_agent("serve", "node-a")  # same executor id: it recovers its own runs
    async with a2a_client(server.url) as client:
        finished = await wait_for(client, task.id, timeout=90)
    assert finished.status.state == COMPLETED
    assert all(i["status"] == "done" for i in plan_of(finished)["items"])

    keys = ledger.read_text().split()
    counts = Counter(keys)
    assert set(counts) == {f"{task.id}:i{n}:1:run" for n in range(5)}
    # Items finished before the stop never ran again; only the one in flight may repeat,
    # and then under the same key.
    for key in done_before[:2]:
        assert counts[key] == 1
    assert sum(counts.values()) <= 6
    assert_transitions_sound(database_url, task.id)


@pytest.mark.slow
async def test_api_only_process_and_separate_worker(
    start_agent: StartAgent, database_url: str
) -> None:
    api = start_agent("serve", "api-1", "--no-worker")
    async with a2a_client(api.url) as client:
        task = await send(client, plan_message([item("a", "true", "true")]))
        time.sleep(1.5)
        waiting = await wait_for(client, task.id, {TaskState.TASK_STATE_SUBMITTED})
        assert waiting.status.state == TaskState.TASK_STATE_SUBMITTED  # no worker yet
        start_agent("worker", "worker-1")
        finished = await wait_for(client, task.id, timeout=60)
    assert finished.status.state == COMPLETED
    with psycopg.connect(database_url) as conn:
        reasons = [
            r[0]
            for r in conn.execute(
                "SELECT reason FROM transitions "
                "WHERE task_id = %s AND to_state = 'working' AND from_state <> 'working'",
                (task.id,),
            )
        ]
    assert reasons == ["picked up by worker worker-1"]
