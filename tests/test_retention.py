"""Retention: ended tasks go, with all their rows, runs and workspace; nothing else does."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import psycopg
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_row

FAST = {"A2A_AGENT_RECONCILE_INTERVAL_S": "0.5"}


def rows_of(database_url: str, task_id: str) -> dict[str, int]:
    counts = {}
    with psycopg.connect(database_url) as conn:
        for table in ("tasks", "items", "events", "transitions", "effects"):
            column = "id" if table == "tasks" else "task_id"
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE {column} = %s",
                (task_id,),
            ).fetchone()
            counts[table] = row[0] if row else 0
        row = conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE workflow_uuid LIKE %s",
            (task_id + "%",),
        ).fetchone()
        counts["workflows"] = row[0] if row else 0
    return counts


async def test_ended_tasks_are_deleted_after_the_retention_and_running_ones_kept(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    orphan = home / "workspaces" / "no-such-task"  # a workspace whose task was pruned elsewhere
    orphan.mkdir(parents=True)
    server = start_agent("serve", "keep-1", A2A_AGENT_TASK_RETENTION_S="3", **FAST)
    async with a2a_client(server.url) as client:
        done = await send(client, plan_message([item("a", "echo hi > a.txt", "test -f a.txt")]))
        failed = await send(client, plan_message([item("b", "true", "false")]))
        running = await send(client, plan_message([item("c", "sleep 60", "true")]))
        assert (await wait_for(client, done.id)).status.state == TaskState.TASK_STATE_COMPLETED
        assert (await wait_for(client, failed.id)).status.state == TaskState.TASK_STATE_FAILED
        before = rows_of(database_url, done.id)
        assert min(before.values()) > 0, before
        assert (home / "workspaces" / done.id / "a.txt").exists()
        wait_for_row(
            database_url,
            "SELECT count(*) = 0 FROM tasks WHERE id = ANY(%s)",
            ([done.id, failed.id],),
            what="both ended tasks pruned",
        )
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=done.id))
        kept = await client.get_task(GetTaskRequest(id=running.id))
        assert kept.status.state == TaskState.TASK_STATE_WORKING
    # The rows go first, then the runs, the directory and the commands' pid files (which
    # stay between a task's commands, naming no group).
    pid_files = home / "workspaces" / ".commands"
    gone = [home / "workspaces" / t for t in (done.id, failed.id)]
    gone += [pid_files / f"{t}.pid" for t in (done.id, failed.id)]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(path.exists() for path in gone):
        time.sleep(0.05)
    for task_id in (done.id, failed.id):
        assert set(rows_of(database_url, task_id).values()) == {0}
    assert [path for path in gone if path.exists()] == []
    assert (pid_files / f"{running.id}.pid").exists()  # its command runs, noted there
    assert rows_of(database_url, running.id)["tasks"] == 1
    assert (home / "workspaces" / running.id).exists()
    assert not orphan.exists()
    assert "pruned 1 task(s)" in server.log() or "pruned 2 task(s)" in server.log()


async def test_compaction_drops_records_and_keeps_the_task_and_its_results(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent(
        "serve",
        "keep-3",
        A2A_AGENT_RECORD_RETENTION_S="2",
        A2A_AGENT_TASK_RETENTION_S="0",
        **FAST,
    )
    async with a2a_client(server.url) as client:
        done = await send(client, plan_message([item("a", "echo hi > a.txt", "test -f a.txt")]))
        running = await send(client, plan_message([item("c", "sleep 60", "true")]))
        assert (await wait_for(client, done.id)).status.state == TaskState.TASK_STATE_COMPLETED
        with psycopg.connect(database_url) as conn:
            conn.execute(
                "INSERT INTO push_configs (task_id, id, url, owner) VALUES (%s, 'p', %s, '')",
                (done.id, "https://example.com/hook"),
            )
        wait_for_row(
            database_url,
            "SELECT compacted_at IS NOT NULL FROM tasks WHERE id = %s",
            (done.id,),
            what="the ended task compacted",
        )
        kept = await client.get_task(GetTaskRequest(id=done.id))
        assert {a.artifact_id for a in kept.artifacts} >= {"plan", "report", "diff", "bundle"}
    # The rows go in the compacting statement; the engine's runs after it, in their own call.
    wait_for_row(
        database_url,
        "SELECT count(*) = 0 FROM dbos.workflow_status WHERE workflow_uuid LIKE %s",
        (done.id + "%",),
        what="the compacted task's runs forgotten by the engine",
    )
    counts = rows_of(database_url, done.id)
    assert (counts["effects"], counts["events"], counts["workflows"]) == (0, 0, 0)
    assert counts["tasks"] == 1 and counts["items"] == 1 and counts["transitions"] > 0
    with psycopg.connect(database_url) as conn:
        (pushes, checkpoints, outputs) = conn.execute(
            "SELECT (SELECT count(*) FROM push_configs WHERE task_id = %(t)s),"
            " (SELECT count(*) FROM checkpoints WHERE task_id = %(t)s),"
            " (SELECT count(*) FROM task_files WHERE task_id = %(t)s AND kind = 'output')",
            {"t": done.id},
        ).fetchone() or (None, None, None)
    assert (pushes, outputs) == (0, 2) and checkpoints and checkpoints > 0
    deadline = time.monotonic() + 10
    while (home / "workspaces" / done.id).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (home / "workspaces" / done.id).exists()
    # A run still going is untouched.
    assert rows_of(database_url, running.id)["effects"] > 0
    assert (home / "workspaces" / running.id).exists()
    diff = httpx.get(f"{server.url}/outputs/{done.id}/diff", timeout=10)
    assert diff.status_code == 200 and b"a.txt" in diff.content


async def test_kept_tasks_still_have_orphaned_workspaces_swept(
    start_agent: StartAgent, home: Path
) -> None:
    # Ended tasks kept for ever (0): the sweep of workspaces whose task is gone still runs.
    orphan = home / "workspaces" / "pruned-elsewhere"
    orphan.mkdir(parents=True)
    (orphan / "left.txt").write_text("a workspace of a task no database knows")
    server = start_agent("serve", "keep-3", A2A_AGENT_TASK_RETENTION_S="0", **FAST)
    async with a2a_client(server.url) as client:
        done = await send(client, plan_message([item("a", "echo hi > a.txt", "test -f a.txt")]))
        assert (await wait_for(client, done.id)).status.state == TaskState.TASK_STATE_COMPLETED
    deadline = time.monotonic() + 30
    while orphan.exists():
        assert time.monotonic() < deadline, "the orphaned workspace was never swept"
        time.sleep(0.2)
    assert (home / "workspaces" / done.id / "a.txt").exists()  # a kept task keeps its own
