"""A real server on loopback, driven by the a2a-sdk client from submission to completion."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import psycopg
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from tests.support.a2a import (
    a2a_client,
    item,
    plan_message,
    plan_of,
    report_of,
    send,
    send_request,
    wait_for,
)
from tests.support.processes import StartAgent

COMPLETED = TaskState.TASK_STATE_COMPLETED


def _git(workspace: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=workspace, check=True, capture_output=True, text=True
    ).stdout


async def test_three_item_plan_runs_to_completion(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent()
    items = [
        item("one", "echo 1 > one.txt", "test -f one.txt"),
        item(
            "two",
            "echo 2 > two.txt && sleep 0.5",
            {"command": "grep -q 2 two.txt", "timeout_s": 30},
        ),
        item(
            "three",
            "cat one.txt two.txt > three.txt",
            "test $(wc -l < three.txt) -eq 2",
            max_attempts=3,
        ),
    ]
    async with a2a_client(server.url) as client, a2a_client(server.url, streaming=True) as sub:
        task = await send(client, plan_message(items, "three files"))
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED
        assert [i["status"] for i in plan_of(task)["items"]] == ["pending"] * 3

        states = []
        async for event in sub.subscribe(SubscribeToTaskRequest(id=task.id)):
            if event.HasField("status_update"):
                states.append(event.status_update.status.state)
        assert states[-1] == COMPLETED

        done = await wait_for(client, task.id)
        assert done.status.state == COMPLETED

    plan = plan_of(done)
    assert [i["id"] for i in plan["items"]] == ["one", "two", "three"]
    assert all(i["status"] == "done" for i in plan["items"])
    shas = [i["commit"] for i in plan["items"]]
    assert all(isinstance(sha, str) and len(sha) == 40 for sha in shas)
    assert plan["items"][0]["evidence"]["exitCode"] == 0
    progress = dict(done.metadata["progress"])
    assert progress == {
        "itemsTotal": 3,
        "itemsDone": 3,
        "itemsFailed": 0,
        "itemsSkipped": 0,
        "itemsRegressed": 0,
        "currentItem": None,
    }
    report = report_of(done)
    assert report["itemsDone"] == ["one", "two", "three"] and report["remaining"] == []

    with psycopg.connect(database_url) as conn:
        seqs = [
            r[0]
            for r in conn.execute(
                "SELECT seq FROM transitions WHERE task_id = %s ORDER BY seq", (task.id,)
            )
        ]
        item_rows = conn.execute(
            "SELECT item_id, status, commit_sha FROM items WHERE task_id = %s ORDER BY position",
            (task.id,),
        ).fetchall()
    assert seqs == list(range(1, len(seqs) + 1))
    # submitted, working, 3 x (in_progress, verifying, done), the checks re-run, completed
    assert len(seqs) == 2 + 9 + 1 + 1
    assert [(r[0], r[1], r[2]) for r in item_rows] == [
        (i["id"], "done", i["commit"]) for i in plan["items"]
    ]

    workspace = home / "workspaces" / task.id
    log = _git(workspace, "log", "--format=%H").split()
    for sha in shas:
        assert sha in log
    # The start commit, one per verified item, and the run's end (its final plan.json and
    # progress.md, so the workspace is left clean).
    assert len(log) == 5
    stored = json.loads((workspace / "plan.json").read_text())
    assert [i["status"] for i in stored["items"]] == ["done"] * 3
    assert [i["commit"] for i in stored["items"]] == shas
    progress_md = (workspace / "progress.md").read_text()
    assert "item `three` (attempt 1) verifying -> done" in progress_md
    # The committed plan.json of the last item already shows that item done.
    committed = json.loads(_git(workspace, "show", f"{shas[2]}:plan.json"))
    assert committed["items"][2]["status"] == "done"


async def test_failing_verification_fails_the_task_with_evidence(
    start_agent: StartAgent, home: Path
) -> None:
    server = start_agent()
    items = [
        item("ok", "true", "true"),
        item(
            "bad",
            "echo attempt >> tries.txt",
            "echo 'expected 3 lines' >&2; exit 3",
            max_attempts=2,
        ),
        item("never", "true", "true"),
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(items))
        done = await wait_for(client, task.id)
    assert done.status.state == TaskState.TASK_STATE_FAILED
    assert "bad" in done.status.message.parts[0].text
    assert "exited 3" in done.status.message.parts[0].text
    plan = {i["id"]: i for i in plan_of(done)["items"]}
    assert plan["ok"]["status"] == "done"
    assert plan["bad"]["status"] == "failed" and plan["bad"]["attempts"] == 2
    evidence = plan["bad"]["evidence"]
    assert evidence["command"] == "echo 'expected 3 lines' >&2; exit 3"
    assert evidence["exitCode"] == 3
    assert "expected 3 lines" in evidence["outputTail"]
    assert plan["never"]["status"] == "pending"
    report = report_of(done)
    assert report["itemsFailed"] == ["bad"] and report["remaining"] == ["never"]

    workspace = home / "workspaces" / task.id
    assert (workspace / "tries.txt").read_text().count("attempt") == 2
    progress_md = (workspace / "progress.md").read_text()
    assert "## Failure of item `bad`" in progress_md
    assert "exited 3" in progress_md and "expected 3 lines" in progress_md


async def test_blocking_send_returns_the_finished_task(start_agent: StartAgent) -> None:
    server = start_agent()
    async with a2a_client(server.url) as client:
        task = await send(
            client, plan_message([item("a", "true", "true")]), return_immediately=False
        )
    assert task.status.state == COMPLETED
    assert plan_of(task)["items"][0]["status"] == "done"


async def test_streaming_send_reports_every_item(start_agent: StartAgent) -> None:
    server = start_agent()
    items = [item("a", "true", "true"), item("b", "true", "true")]
    async with a2a_client(server.url, streaming=True) as client:
        kinds: list[str] = []
        statuses: list[list[str]] = []
        async for event in client.send_message(send_request(plan_message(items))):
            kind = event.WhichOneof("payload")
            assert kind is not None
            kinds.append(kind)
            if event.HasField("artifact_update") and event.artifact_update.artifact.name == "plan":
                data = get_data_parts(event.artifact_update.artifact.parts)[0]
                statuses.append([i["status"] for i in data["plan"]["items"]])
    assert kinds[0] == "task"
    assert kinds[-1] == "status_update"
    assert ["in_progress", "pending"] in statuses
    assert ["done", "done"] in statuses


async def test_cancel_stops_a_running_command(start_agent: StartAgent, home: Path) -> None:
    server = start_agent()
    items = [
        item("slow", "sleep 60; touch finished.txt", "test -f finished.txt"),
        item("after", "true", "true"),
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(items))
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING})
        canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await asyncio.sleep(3)
        final = await client.get_task(GetTaskRequest(id=task.id))
    assert final.status.state == TaskState.TASK_STATE_CANCELED
    plan = {i["id"]: i for i in plan_of(final)["items"]}
    assert plan["after"]["status"] == "pending"
    workspace = home / "workspaces" / task.id
    # The command's process group was killed, not left running: at once when the run hears
    # the cancel's NOTIFY, else at its next look at the task (ENDED_POLL_S, 5 s).
    for _ in range(150):
        ps = subprocess.run(
            ["pgrep", "-f", "sleep 60; touch finished.txt"], check=False, capture_output=True
        )
        if ps.returncode == 1:
            break
        await asyncio.sleep(0.1)
    assert ps.returncode == 1, ps.stdout
    assert not (workspace / "finished.txt").exists()


async def test_list_tasks_and_history_length(start_agent: StartAgent) -> None:
    server = start_agent()
    async with a2a_client(server.url) as client:
        first = await send(
            client, plan_message([item("a", "true", "true")]), return_immediately=False
        )
        second = await send(
            client,
            plan_message([item("b", "false", "false", max_attempts=1)]),
            return_immediately=False,
        )
        assert second.status.state == TaskState.TASK_STATE_FAILED
        page = await client.list_tasks(ListTasksRequest(page_size=1))
        assert page.total_size == 2 and len(page.tasks) == 1 and page.next_page_token
        rest = await client.list_tasks(
            ListTasksRequest(page_size=1, page_token=page.next_page_token)
        )
        assert {page.tasks[0].id, rest.tasks[0].id} == {first.id, second.id}
        assert not rest.next_page_token
        failed = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_FAILED))
        assert [t.id for t in failed.tasks] == [second.id]
        by_context = await client.list_tasks(ListTasksRequest(context_id=first.context_id))
        assert [t.id for t in by_context.tasks] == [first.id]
        full = await client.get_task(GetTaskRequest(id=first.id))
        assert len(full.history) == 1
        none = await client.get_task(GetTaskRequest(id=first.id, history_length=0))
        assert len(none.history) == 0
