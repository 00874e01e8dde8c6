"""Crash safety with real processes: kill -9, lost workspaces, dead workers, a restarted
database, and a code upgrade in the middle of a run."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState
from psycopg.conninfo import make_conninfo

from tests.support.a2a import a2a_client, item, plan_message, plan_of, send, wait_for
from tests.support.processes import REPO, AgentProcess, StartAgent
from tests.support.waiting import wait_for_line, wait_for_row
from tests.test_restart import assert_transitions_sound, ledger_items, wait_items_done

COMPLETED = TaskState.TASK_STATE_COMPLETED
pytestmark = [pytest.mark.slow, pytest.mark.processes]


def wait_effect_started(database_url: str, key: str, timeout: float = 30) -> None:
    wait_for_row(
        database_url,
        "SELECT count(*) > 0 FROM effects WHERE key = %s",
        (key,),
        what=key,
        timeout=timeout,
    )


async def test_kill9_resumes_in_flight_step_with_the_same_key(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "node-k")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 1.5)))
    key = f"{task.id}:i1:1:run"
    wait_effect_started(database_url, key)
    wait_for_line(ledger, key)
    time.sleep(0.3)  # the command is running, and has not touched the workspace yet
    server.kill()
    server = start_agent("serve", "node-k")
    async with a2a_client(server.url) as client:
        finished = await wait_for(client, task.id, timeout=60)
    assert finished.status.state == COMPLETED
    counts = Counter(ledger.read_text().split())
    assert counts[f"{task.id}:i0:1:run"] == 1
    assert counts[key] == 2  # the interrupted step ran again under the same key
    assert counts[f"{task.id}:i2:1:run"] == 1
    with psycopg.connect(database_url) as conn:
        runs = conn.execute("SELECT runs, status FROM effects WHERE key = %s", (key,)).fetchone()
    assert runs == (2, "completed")
    assert_transitions_sound(database_url, task.id)


async def test_lost_workspace_is_restored_from_checkpoints(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    items = [
        item("first", "echo one > one.txt", "test -f one.txt"),
        item("second", "sleep 1.5; echo two > two.txt", "test -f two.txt"),
    ]
    server = start_agent("serve", "node-w")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(items))
    wait_effect_started(database_url, f"{task.id}:second:1:run")
    server.kill()
    workspace = home / "workspaces" / task.id
    shutil.rmtree(workspace)  # the disk is gone: a new machine starts from nothing
    server = start_agent("serve", "node-w")
    async with a2a_client(server.url) as client:
        finished = await wait_for(client, task.id, timeout=60)
    assert finished.status.state == COMPLETED
    plan = {i["id"]: i for i in plan_of(finished)["items"]}
    assert plan["second"]["attempts"] == 2
    assert (workspace / "one.txt").read_text() == "one\n"
    log = subprocess.run(
        ["git", "log", "--format=%H"], cwd=workspace, check=True, capture_output=True, text=True
    ).stdout.split()
    assert plan["first"]["commit"] in log and plan["second"]["commit"] in log
    assert len(log) == 4  # start, first, second (restored from bundles, then worked), the end
    with psycopg.connect(database_url) as conn:
        reasons = [
            r[0]
            for r in conn.execute(
                "SELECT reason FROM transitions WHERE task_id = %s AND item_id = 'second'",
                (task.id,),
            )
        ]
    assert any("restored checkpoint" in r and "attempt 2" in r for r in reasons), reasons
    assert "restored checkpoint" in (workspace / "progress.md").read_text()


async def test_survivor_takes_over_a_dead_worker(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    timeout = "4"
    api = start_agent("serve", "api", "--no-worker", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout)
    doomed = start_agent(
        "worker", "doomed", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout, A2A_AGENT_WORKER_CONCURRENCY="8"
    )
    async with a2a_client(api.url) as client:
        tasks = [await send(client, plan_message(ledger_items(3, ledger, 0.5))) for _ in range(3)]
        wait_items_done(database_url, tasks[0].id, 1)
        doomed.kill()  # and it never comes back
        killed_at = time.monotonic()
        start_agent("worker", "survivor", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout)
        for task in tasks:
            finished = await wait_for(client, task.id, timeout=60)
            assert finished.status.state == COMPLETED
        took = time.monotonic() - killed_at
    assert took < float(timeout) + 15, took
    counts = Counter(ledger.read_text().split())
    assert len(counts) == 9 and max(counts.values()) <= 2
    for task in tasks:
        assert_transitions_sound(database_url, task.id)


async def test_executor_id_in_use_is_refused(start_agent: StartAgent) -> None:
    start_agent("worker", "twin")
    with pytest.raises(RuntimeError, match="in use by pid"):
        start_agent("worker", "twin")


def refused_start(process: AgentProcess) -> tuple[int, str]:
    """A `serve` that cannot start: its exit code and what it printed."""
    process.start(wait=False)
    assert process.proc is not None
    return process.proc.wait(60), process.log()


async def test_a_serve_that_cannot_start_says_why_in_a_line_and_exits_non_zero(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    """Whatever started `serve` (make run, systemd, a container) sees a failed start: no
    "serving on" banner first, the reason in one line, no traceback, and a non-zero exit (it
    was 0 when the database was away, with the banner printed)."""
    start_agent("serve", "twin-s")
    twin = AgentProcess(role="serve", database_url=database_url, home=home, executor_id="twin-s")
    code, said = refused_start(twin)
    assert code == 3, said
    assert "cannot start: executor id 'twin-s' is in use by pid" in said
    away = make_conninfo(database_url, dbname="a2a_no_such_database")
    lost = AgentProcess(role="serve", database_url=away, home=home / "away", executor_id="away")
    code, told = refused_start(lost)
    assert code == 2, told
    assert "a2a-agent: the database is unavailable" in told
    assert 'database "a2a_no_such_database" does not exist' in told  # what to fix
    for output in (said, told):
        assert "Traceback" not in output and "serving on" not in output, output


async def test_stuck_run_is_stopped_with_a_final_entry(start_agent: StartAgent, home: Path) -> None:
    server = start_agent(
        "serve", "node-s", A2A_AGENT_STUCK_AFTER_S="3", A2A_AGENT_HEARTBEAT_TIMEOUT_S="3"
    )
    items = [item("hang", "sleep 120; touch never.txt", "true"), item("next", "true", "true")]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(items))
        finished = await wait_for(client, task.id, timeout=30)
        assert finished.status.state == TaskState.TASK_STATE_FAILED
        text = finished.status.message.parts[0].text
        assert "stuck" in text and "3 s" in text
        # The run sees the end and closes its record (the final entry) right after: the item
        # it was on says it was interrupted, the next one was never begun.
        wait_for_line(home / "workspaces" / task.id / "progress.md", "stopped as stuck")
        for _ in range(100):
            now = await client.get_task(GetTaskRequest(id=task.id))
            plan = {i["id"]: i for i in plan_of(now)["items"]}
            if plan["hang"]["status"] != "in_progress":
                break
            await asyncio.sleep(0.1)
    assert plan["hang"]["status"] == "interrupted"
    assert plan["next"]["status"] == "pending"
    time.sleep(1.5)
    ps = subprocess.run(
        ["pgrep", "-f", "sleep 120; touch never.txt"], check=False, capture_output=True
    )
    assert ps.returncode == 1, "the stuck command was left running"


async def test_run_resumes_after_a_code_upgrade(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    upgraded = tmp_path / "v2"
    for package in ("a2a_agent", "persistence"):
        shutil.copytree(
            REPO / package, upgraded / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(REPO / "agent_card.json", upgraded / "agent_card.json")
    render = upgraded / "a2a_agent" / "harness" / "kernel" / "render.py"
    render.write_text(
        render.read_text().replace(
            '"the newest entry is last."', '"the newest entry is last. (upgraded)"'
        )
    )

    server = start_agent("serve", "node-u")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 0.8)))
    wait_items_done(database_url, task.id, 1)
    server.kill()
    new = AgentProcess(
        role="serve", database_url=database_url, home=home, executor_id="node-u", code_dir=upgraded
    ).start()
    try:
        async with a2a_client(new.url) as client:
            finished = await wait_for(client, task.id, timeout=60)
    finally:
        new.kill()
    assert finished.status.state == COMPLETED
    assert "(upgraded)" in (home / "workspaces" / task.id / "progress.md").read_text()
    counts = Counter(ledger.read_text().split())
    assert counts[f"{task.id}:i0:1:run"] == 1 and len(counts) == 3
    assert_transitions_sound(database_url, task.id)


async def test_killed_process_is_replaced_at_once_and_resumes(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "node-n")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 1.0)))
        key = f"{task.id}:i1:1:run"
        wait_effect_started(database_url, key)
        wait_for_line(ledger, key)  # the command is running
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT pid FROM workers WHERE executor_id = 'node-n'").fetchone()
        assert row is not None
        os.kill(row[0], signal.SIGKILL)  # the serving process, not its nanny
        finished = await wait_for(client, task.id, timeout=60)  # same URL, same socket
    assert finished.status.state == COMPLETED
    assert server.proc is not None and server.proc.poll() is None
    with psycopg.connect(database_url) as conn:
        new = conn.execute("SELECT pid FROM workers WHERE executor_id = 'node-n'").fetchone()
    assert new is not None and new[0] != row[0]
    counts = Counter(ledger.read_text().split())
    assert counts[key] == 2 and len(counts) == 3
    assert "was killed by signal 9" in server.log()
    assert_transitions_sound(database_url, task.id)


async def test_a_killed_workers_command_dies_with_it(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    """The serving process killed -9 while an item's command runs: the command's box dies
    with it (bwrap's --die-with-parent), nothing of it goes on writing; the command that runs
    after is the resumed step's."""
    beats = tmp_path / "beats"
    beats.mkdir()
    loop = f"t=$RANDOM$RANDOM; while :; do date +%s%N > {beats}/$t; sleep 0.05; done"
    server = start_agent("serve", "node-b")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("a", loop, "true")]))
        deadline = time.monotonic() + 30
        while not any(beats.iterdir()):
            assert time.monotonic() < deadline, "the command never started"
            await asyncio.sleep(0.05)
        (first,) = list(beats.iterdir())
        with psycopg.connect(database_url) as conn:
            row = conn.execute("SELECT pid FROM workers WHERE executor_id = 'node-b'").fetchone()
        assert row is not None
        os.kill(row[0], signal.SIGKILL)
        await asyncio.sleep(1.0)
        then = first.read_text()
        await asyncio.sleep(1.0)
        assert first.read_text() == then  # the killed worker's command writes no more
        await client.cancel_task(CancelTaskRequest(id=task.id))


async def test_sigterm_drains_the_step_and_hands_over_at_once(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    api = start_agent("serve", "api-d", "--no-worker")
    first = start_agent("worker", "drain-1", A2A_AGENT_SHUTDOWN_GRACE_S="20")
    async with a2a_client(api.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 2.0)))
        key = f"{task.id}:i0:1:run"
        wait_effect_started(database_url, key)
        start_agent("worker", "drain-2")
        stopped_at = time.monotonic()
        assert first.stop(timeout=30) == 0
        drain_s = time.monotonic() - stopped_at
        with psycopg.connect(database_url) as conn:
            effect = conn.execute(
                "SELECT status, runs FROM effects WHERE key = %s", (key,)
            ).fetchone()
        assert effect == ("completed", 1)  # the step in flight finished before the exit
        finished = await wait_for(client, task.id, timeout=60)
        handed_over_s = time.monotonic() - stopped_at
    assert finished.status.state == COMPLETED
    assert drain_s < 20
    # No heartbeat timeout (30 s by default) was waited for: the stopped worker said so.
    assert handed_over_s < 25, handed_over_s
    counts = Counter(ledger.read_text().split())
    assert len(counts) == 3 and max(counts.values()) == 1
    with psycopg.connect(database_url) as conn:
        executor = conn.execute(
            "SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s", (task.id,)
        ).fetchone()
    assert executor == ("drain-2",)


async def test_a_slow_worker_that_comes_back_repeats_nothing_under_a_new_key(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    timeout = "3"
    api = start_agent("serve", "api-s", "--no-worker", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout)
    slow = start_agent("worker", "slow", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout)
    async with a2a_client(api.url) as client:
        task = await send(client, plan_message(ledger_items(3, ledger, 1.0)))
        wait_effect_started(database_url, f"{task.id}:i1:1:run")
        assert slow.proc is not None
        os.killpg(slow.proc.pid, signal.SIGSTOP)  # frozen, not dead: a long GC pause, a VM stall
        start_agent("worker", "fast", A2A_AGENT_HEARTBEAT_TIMEOUT_S=timeout)
        finished = await wait_for(client, task.id, timeout=60)
        os.killpg(slow.proc.pid, signal.SIGCONT)  # it wakes up and carries on where it was
        await asyncio.sleep(4)
        again = await wait_for(client, task.id, timeout=10)
    assert finished.status.state == again.status.state == COMPLETED
    keys = ledger.read_text().split()
    counts = Counter(keys)
    # Whatever ran twice ran under the key of the same step; no step got a second key.
    assert set(counts) == {f"{task.id}:i{n}:1:run" for n in range(3)}
    assert max(counts.values()) <= 2
    assert_transitions_sound(database_url, task.id)
    assert plan_of(again)["items"] == plan_of(finished)["items"]
