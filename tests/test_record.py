"""What a caller or a person reads tells what happened: every attempt's evidence, crash
re-runs, and a workspace whose files, commits and rows agree at every end."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from a2a.client.client import Client
from a2a.types.a2a_pb2 import CancelTaskRequest, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_message, plan_of, report_of, send, wait_for
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_row
from tests.test_restart import ledger_items


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(workspace), *args], capture_output=True, text=True, check=True
    ).stdout


def assert_record_agrees(task: Task, workspace: Path, database_url: str) -> None:
    """A clean workspace whose plan.json and progress.md say what the rows and the A2A task
    say."""
    assert git(workspace, "status", "--porcelain") == "", git(workspace, "status")
    files = json.loads((workspace / "plan.json").read_text())["items"]
    artifact = plan_of(task)["items"]
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT item_id, status, attempts, commit_sha FROM items WHERE task_id = %s "
            "ORDER BY position",
            (task.id,),
        ).fetchall()
        transitions = conn.execute(
            "SELECT count(*) FROM transitions WHERE task_id = %s", (task.id,)
        ).fetchone()
    assert [(i["id"], i["status"], i["attempts"], i["commit"]) for i in files] == [
        tuple(r) for r in rows
    ]
    assert [(i["id"], i["status"], i["attempts"], i["commit"]) for i in artifact] == [
        tuple(r) for r in rows
    ]
    # One view (persistence/views.py), stored with the rows and written into the workspace:
    # the plan artifact and plan.json say the same of every item, field by field.
    for shown, written in zip(whole(artifact), whole(files), strict=True):
        differ = {k: (shown.get(k), written.get(k)) for k in shown.keys() | written.keys()
                  if shown.get(k) != written.get(k)}  # fmt: skip
        assert not differ, (shown["id"], differ)
    # And the verification counts: metadata.verification and the report's.
    report = [a for a in task.artifacts if a.artifact_id == "report"]
    if report:
        counted = whole(MessageToDict(task.metadata)["verification"])
        assert whole(report_of(task)["verification"]) == counted
    entries = [
        line for line in (workspace / "progress.md").read_text().splitlines() if line[:4] == "- 20"
    ]
    assert transitions is not None and len(entries) == transitions[0]


def whole(value: Any) -> Any:
    """`value` with whole floats as ints (a protobuf Value carries every number as a float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole(v) for v in value]
    return value


async def ended_with_report(client: Client, task_id: str) -> Task:
    """The task once its run has closed its record (after a cancel, a moment later)."""
    deadline = time.monotonic() + 30
    while True:
        task = await wait_for(client, task_id)
        if any(a.artifact_id == "report" for a in task.artifacts):
            return task
        assert time.monotonic() < deadline, "the run never closed its record"
        await asyncio.sleep(0.2)


async def test_every_attempt_keeps_its_evidence_and_run_output(
    start_agent: StartAgent, home: Path
) -> None:
    server = start_agent()
    flaky = item(
        "flaky",
        "echo attempt >> tries.txt; echo output of the run",
        "echo checking; test $(wc -l < tries.txt) -ge 2",
        max_attempts=3,
    )
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([flaky]))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (shown,) = plan_of(done)["items"]
    assert shown["run"] == flaky["run"] and shown["maxAttempts"] == 3
    assert shown["verify"] == flaky["verify"]
    precheck, *history = shown["history"]  # attempt 0: the check run before the work
    assert precheck["attempt"] == 0 and precheck["precheck"]["result"] == "fails_before"
    assert [h["attempt"] for h in history] == [1, 2]
    assert [h["outcome"] for h in history] == ["retry", "done"]
    assert [h["verify"]["exitCode"] for h in history] == [1, 0]
    assert all("output of the run" in h["run"]["outputTail"] for h in history)
    assert all(h["run"]["runs"] == 1 and h["run"]["durationS"] >= 0 for h in history)
    stored = json.loads((home / "workspaces" / task.id / "plan.json").read_text())
    assert stored["items"][0]["history"] == [precheck, *history]


async def test_the_record_agrees_after_completion_failure_and_cancel(
    start_agent: StartAgent, home: Path, database_url: str
) -> None:
    server = start_agent()
    async with a2a_client(server.url) as client:
        completed = await send(client, plan_message([item("a", "echo a > a.txt", "test -f a.txt")]))
        failed = await send(
            client, plan_message([item("b", "echo b > b.txt", "false", max_attempts=1)])
        )
        canceled = await send(
            client,
            plan_message(
                [item("c", "echo c > c.txt; sleep 30", "true"), item("d", "true", "true")]
            ),
        )
        await wait_for(client, canceled.id, {TaskState.TASK_STATE_WORKING})
        wait_for_row(
            database_url,
            "SELECT count(*) > 0 FROM effects WHERE key = %s AND runs = 0",
            (f"{canceled.id}:c:1:run",),
            what="item c about to run",
        )
        await asyncio.sleep(0.5)
        await client.cancel_task(CancelTaskRequest(id=canceled.id))
        ends = {
            "completed": await ended_with_report(client, completed.id),
            "failed": await ended_with_report(client, failed.id),
            "canceled": await ended_with_report(client, canceled.id),
        }
    for state, task in ends.items():
        assert TaskState.Name(task.status.state) == f"TASK_STATE_{state.upper()}"
        workspace = home / "workspaces" / task.id
        assert_record_agrees(task, workspace, database_url)
        assert "Run ended" in git(workspace, "log", "-1", "--format=%s")
    canceled_progress = (home / "workspaces" / canceled.id / "progress.md").read_text()
    assert "the run stopped here (canceled)" in canceled_progress
    # c was running when the cancel came: it says so; d was never reached.
    assert report_of(ends["canceled"])["itemsInterrupted"] == ["c"]
    assert report_of(ends["canceled"])["remaining"] == ["d"]
    assert report_of(ends["completed"])["filesChanged"] == ["a.txt"]  # .gitignore came first


async def test_build_junk_is_ignored_unless_the_workspace_has_its_own_gitignore(
    start_agent: StartAgent,
) -> None:
    server = start_agent()
    junk = item("junk", "mkdir -p __pycache__ && touch __pycache__/x.pyc m.py", "test -f m.py")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([junk]))
        done = await wait_for(client, task.id, timeout=60)
    assert report_of(done)["filesChanged"] == ["m.py"]


@pytest.mark.processes
@pytest.mark.slow
async def test_a_crash_rerun_is_in_the_record(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "rerun")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(2, ledger, 1.5)))
    key = f"{task.id}:i1:1:run"
    wait_for_row(
        database_url,
        "SELECT count(*) > 0 FROM effects WHERE key = %s",
        (key,),
        what=key,
    )
    time.sleep(0.4)
    server.kill()
    server = start_agent("serve", "rerun")
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    note = "`run` of item `i1` re-ran after the worker was lost; run 2 of this step"
    assert note in (home / "workspaces" / task.id / "progress.md").read_text()
    with psycopg.connect(database_url) as conn:
        reasons = [
            r[0]
            for r in conn.execute(
                "SELECT reason FROM transitions WHERE task_id = %s ORDER BY seq", (task.id,)
            )
        ]
    assert note in reasons
    report = report_of(done)
    assert report["reruns"] == 1 and report["stepsRerun"] == 1
    assert report["workspacesRestored"] == 0
    history = [h for h in plan_of(done)["items"][1]["history"] if h["attempt"] > 0]
    assert history[0]["run"]["runs"] == 2
