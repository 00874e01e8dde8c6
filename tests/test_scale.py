"""Scaling out on one database (issue 16, part 2): workers on machines that share nothing but
PostgreSQL. A worker with an empty disk takes over a lost worker's run, rebuilds the
workspace from the checkpoints in the database, and finishes it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import AgentProcess
from tests.test_restart import assert_transitions_sound

pytestmark = pytest.mark.slow


@pytest.fixture
def machines(database_url: str, tmp_path: Path) -> Iterator[dict[str, AgentProcess]]:
    """An API process and two workers, each with a home (disk) of its own."""
    fast = {"A2A_AGENT_HEARTBEAT_TIMEOUT_S": "3", "A2A_AGENT_RECONCILE_INTERVAL_S": "1"}
    started = {
        "api": AgentProcess(
            role="serve", database_url=database_url, home=tmp_path / "api-disk",
            executor_id="api", extra_args=("--no-worker",), env=fast,
        ),
        "east": AgentProcess(
            role="worker", database_url=database_url, home=tmp_path / "east-disk",
            executor_id="east", env=fast,
        ),
        "west": AgentProcess(
            role="worker", database_url=database_url, home=tmp_path / "west-disk",
            executor_id="west", env=fast,
        ),
    }  # fmt: skip
    for process in started.values():
        process.start()
    yield started
    for process in started.values():
        process.kill()


def executor_of(database_url: str, task_id: str) -> str | None:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s", (task_id,)
        ).fetchone()
    return str(row[0]) if row else None


async def test_a_worker_with_an_empty_disk_takes_over_and_restores(
    machines: dict[str, AgentProcess], database_url: str
) -> None:
    items = [
        item("one", "echo 1 > one.txt", "test -f one.txt"),
        item("two", "sleep 2; echo 2 > two.txt", "test -f two.txt"),
        item("three", "cat one.txt two.txt > three.txt", "test -s three.txt"),
    ]
    async with a2a_client(machines["api"].url) as client:
        task = await send(client, plan_message(items))
        deadline = time.monotonic() + 60
        while True:
            with psycopg.connect(database_url) as conn:
                started = conn.execute(
                    "SELECT 1 FROM effects WHERE key = %s", (f"{task.id}:two:1:run",)
                ).fetchone()
            owner = executor_of(database_url, task.id)
            if started and owner in ("east", "west"):
                break
            assert time.monotonic() < deadline, "the run never reached item two"
            time.sleep(0.05)
        assert owner is not None
        lost = machines[owner]
        survivor = machines["west" if owner == "east" else "east"]
        lost.kill()  # and its disk is never seen again
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert executor_of(database_url, task.id) == survivor.executor_id
    workspace = survivor.home / "workspaces" / task.id
    assert (workspace / "three.txt").read_text() == "1\n2\n"
    assert not (lost.home / "workspaces" / task.id / "three.txt").exists()
    with psycopg.connect(database_url) as conn:
        reasons = [
            r for (r,) in conn.execute(
                "SELECT reason FROM transitions WHERE task_id = %s", (task.id,)
            )
        ]  # fmt: skip
        (takeovers,) = conn.execute(
            "SELECT count(*) FROM takeovers WHERE dead_executor = %s", (owner,)
        ).fetchone() or (0,)
    assert any("restored checkpoint" in r for r in reasons), reasons
    assert takeovers == 1
    assert_transitions_sound(database_url, task.id)
