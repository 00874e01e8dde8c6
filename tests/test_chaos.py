"""Chaos: real workers killed with SIGKILL at seeded random moments while plans run.

Every command appends its idempotency key, and what it is, to a ledger outside the workspaces.
After the storm every task must be complete, every effect present under one key per step, no
key used for two different steps, no step run more than twice, transitions contiguous.
Two storms of 11 kills each, seeds A2A_CHAOS_SEED and the one after it (printed on failure);
kills per storm: A2A_CHAOS_KILLS. Two halves rather than one storm of 22: the test processes
run them side by side, and the one long test no longer sets the end of the whole suite.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter, defaultdict
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.processes import AgentProcess, StartAgent
from tests.test_restart import assert_transitions_sound

pytestmark = [pytest.mark.slow, pytest.mark.processes]


def chaos_plan(ledger: Path, n_items: int, rng: random.Random) -> list[dict[str, object]]:
    items = []
    for n in range(n_items):
        sleep = round(rng.uniform(0.1, 0.6), 2)
        items.append(
            item(
                f"i{n}",
                f'echo "$A2A_IDEMPOTENCY_KEY i{n} run" >> {ledger}; sleep {sleep}; echo {n} > f{n}',
                f'echo "$A2A_IDEMPOTENCY_KEY i{n} verify" >> {ledger}; test -f f{n}',
            )
        )
    return items


def recovering(database_url: str) -> int:
    """Steps re-running after a crash that have not finished yet."""
    sql = "SELECT count(*) FROM effects WHERE status = 'started' AND runs >= 2"
    return int(rows(database_url, sql)[0][0])


def completed_effects(database_url: str) -> int:
    return int(rows(database_url, "SELECT count(*) FROM effects WHERE status = 'completed'")[0][0])


def diagnose(database_url: str, task_id: str, seed: int) -> str:
    """What the database knows of a task that did not finish, for the failure message."""
    with psycopg.connect(database_url) as conn:
        parts = [f"task {task_id} did not finish (seed {seed})"]
        for title, sql in (
            ("task", "SELECT state, status_text, updated_at FROM tasks WHERE id = %(t)s"),
            ("items", "SELECT item_id, status, attempts FROM items WHERE task_id = %(t)s"),
            ("effects", "SELECT key, status, runs FROM effects WHERE task_id = %(t)s"),
            (
                "workflow",
                "SELECT status, executor_id, queue_name, recovery_attempts, error "
                "FROM dbos.workflow_status WHERE workflow_uuid = %(t)s",
            ),
            (
                "engine records",
                "SELECT function_id, function_name, error IS NOT NULL "
                "FROM dbos.operation_outputs WHERE workflow_uuid = %(t)s "
                "ORDER BY function_id",
            ),
            (
                "steps",
                "SELECT segment, step_no, name, failure FROM step_results "
                "WHERE task_id = %(t)s ORDER BY segment, step_no",
            ),
            ("workers", "SELECT executor_id, pid, heartbeat_at FROM workers"),
        ):
            parts.append(f"{title}: {conn.execute(sql, {'t': task_id}).fetchall()}")
    return "\n".join(parts)


@pytest.mark.parametrize("half", [0, 1])
async def test_sigkill_storm(
    start_agent: StartAgent, database_url: str, tmp_path: Path, half: int
) -> None:
    seed = int(os.environ.get("A2A_CHAOS_SEED", "20261129")) + half
    kills_wanted = int(os.environ.get("A2A_CHAOS_KILLS", "11"))
    rng = random.Random(seed)
    ledger = tmp_path / "ledger.txt"
    api = start_agent("serve", "chaos-api", "--no-worker")
    workers: dict[str, AgentProcess] = {
        name: start_agent("worker", name, A2A_AGENT_WORKER_CONCURRENCY="3")
        for name in ("chaos-w1", "chaos-w2")
    }
    task_ids: list[str] = []
    kills = 0
    async with a2a_client(api.url) as client:
        while kills < kills_wanted:
            task = await send(client, plan_message(chaos_plan(ledger, 3, rng), f"chaos {kills}"))
            task_ids.append(task.id)
            # Let the system make some progress, and let re-run steps finish, so that no
            # step is interrupted twice; then strike at a random moment.
            before = completed_effects(database_url)
            deadline = time.monotonic() + 60
            while completed_effects(database_url) <= before or recovering(database_url):
                assert time.monotonic() < deadline, f"no progress (seed {seed})"
                await asyncio.sleep(0.05)
            await asyncio.sleep(rng.uniform(0.0, 0.8))
            while recovering(database_url):  # a re-run began meanwhile: let it finish first
                assert time.monotonic() < deadline, f"a re-run never finished (seed {seed})"
                await asyncio.sleep(0.02)
            name = rng.choice(sorted(workers))
            workers[name].kill()
            kills += 1
            await asyncio.sleep(rng.uniform(0.0, 0.5))
            workers[name] = start_agent("worker", name, A2A_AGENT_WORKER_CONCURRENCY="3")
        for task_id in task_ids:
            try:
                finished = await wait_for(client, task_id, timeout=120)
            except TimeoutError as exc:
                raise AssertionError(diagnose(database_url, task_id, seed)) from exc
            assert finished.status.state == TaskState.TASK_STATE_COMPLETED, (
                f"task {task_id} ended {TaskState.Name(finished.status.state)} (seed {seed})"
            )

    lines = [line.split() for line in ledger.read_text().splitlines() if line.strip()]
    runs = Counter(key for key, _, _ in lines)
    meaning: defaultdict[str, set[tuple[str, str]]] = defaultdict(set)
    for key, item_id, step in lines:
        meaning[key].add((item_id, step))
    reused = {k: v for k, v in meaning.items() if len(v) > 1}
    assert not reused, f"keys used for two different steps: {reused} (seed {seed})"
    assert max(runs.values()) <= 2, f"steps run more than twice: {runs.most_common(3)}"
    with psycopg.connect(database_url) as conn:
        effects: dict[str, str] = dict(
            conn.execute(
                # the pre-check and re-verification run the verify command too, under
                # keys of their own
                "SELECT key, status FROM effects "
                "WHERE step IN ('run', 'verify', 'precheck', 'reverify', 'probe')"
            ).fetchall()
        )
        final = conn.execute(
            "SELECT task_id, item_id, attempts FROM items WHERE status = 'done'"
        ).fetchall()
    assert len(final) == 3 * len(task_ids)
    for task_id, item_id, attempt in final:
        for step in ("run", "verify"):
            key = f"{task_id}:{item_id}:{attempt}:{step}"
            assert effects.get(key) == "completed", key
            assert runs[key] >= 1, f"{key} recorded but never ran (seed {seed})"
    # Every key in the ledger is an effect the database knows, under the same key.
    assert set(runs) <= set(effects)
    for task_id in task_ids:
        assert_transitions_sound(database_url, task_id)
