"""However a run on the caller's code ends, it hands back what it did: a canceled run and a
run stopped by its budget get the diff, the bundle and the files changed, as a completed or
failed one does (issue 14, part 2)."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.processes import StartAgent
from tests.test_auth import KEYED, make_key
from tests.test_sources import artifact, data_message, file_bytes, tar_of, tar_part

CANCELED, FAILED = TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_FAILED
SEED = tar_of({"README.md": "# Tool\n", "src": None, "src/app.py": "print('hi')\n"})


async def wait_item_done(client: Any, task_id: str, item_id: str) -> None:
    for _ in range(600):
        task = await wait_for(client, task_id, {TaskState.TASK_STATE_WORKING}, timeout=30)
        if any(i["id"] == item_id and i["status"] == "done" for i in plan_of(task)["items"]):
            return
        subprocess.run(["sleep", "0.1"], check=True)
    raise TimeoutError(f"item {item_id} of {task_id} not done")


def assert_results(done: Task, server_url: str, tmp_path: Path) -> None:
    """The diff applies to the seed, the bundle verifies, and both hold the work done."""
    assert report_of(done)["filesChanged"] == ["README.md"]
    diff = file_bytes(done, "diff", server_url)
    assert b"+one" in diff and b"plan.json" not in diff
    assert artifact(done, "bundle").parts[0].media_type == "application/x-git-bundle"
    bundle = tmp_path / "run.bundle"
    bundle.write_bytes(file_bytes(done, "bundle", server_url))
    seed = tmp_path / "seed"
    seed.mkdir()
    (seed / "src").mkdir()
    (seed / "README.md").write_text("# Tool\n")
    (seed / "src" / "app.py").write_text("print('hi')\n")
    subprocess.run(["git", "apply", "--check", "-"], cwd=seed, input=diff, check=True)
    listed = subprocess.run(
        ["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True
    ).stdout
    assert listed.strip(), "the bundle names no commit"


async def test_a_canceled_run_hands_back_what_it_did(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    items = [
        item("one", "echo one >> README.md", "grep -q one README.md"),
        item("slow", "sleep 120", "true", precheck=False),
    ]
    server = start_agent("serve", f"cancel-{uuid.uuid4().hex[:6]}")
    async with a2a_client(server.url) as client:
        task = await send(
            client, data_message({"plan": {"goal": "g", "items": items}}, tar_part(SEED))
        )
        await wait_item_done(client, task.id, "one")
        await client.cancel_task(CancelTaskRequest(id=task.id))
        done = await wait_for(client, task.id, {CANCELED}, timeout=60)
        for _ in range(300):  # the closing segment adds the results after the state changes
            if any(a.artifact_id == "diff" for a in done.artifacts):
                break
            subprocess.run(["sleep", "0.1"], check=True)
            done = await wait_for(client, task.id, {CANCELED}, timeout=30)
    assert_results(done, server.url, tmp_path)


async def test_a_run_stopped_by_its_budget_hands_back_what_it_did(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    items = [
        item("one", "echo one >> README.md", "grep -q one README.md"),
        item("two", "sleep 6; echo two > two.txt", "test -f two.txt"),
        item("three", "echo three > three.txt", "test -f three.txt"),
    ]
    # Four seconds of wall time: item two's command starts within them and ends after, so
    # its check may not run.
    payload = {"plan": {"goal": "g", "items": items}, "budget": {"max_wall_s": 4}}
    server = start_agent("serve", f"budget-{uuid.uuid4().hex[:6]}")
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(payload, tar_part(SEED)))
        done = await wait_for(client, task.id, {FAILED}, timeout=90)
    failure = MessageToDict(done.metadata)["failure"]
    assert failure["reason"] == "budget_exhausted" and failure["dimension"] == "wallS"
    statuses = {i["id"]: i["status"] for i in plan_of(done)["items"]}
    assert statuses["one"] == "done" and statuses["three"] == "pending"
    assert_results(done, server.url, tmp_path)


async def test_another_owners_task_cannot_be_continued_from(start_agent: StartAgent) -> None:
    server = start_agent("serve", f"owner-{uuid.uuid4().hex[:6]}", **KEYED)
    alice = make_key(server, "alice", "read", "submit", "run")
    bob = make_key(server, "bob", "read", "submit", "run")
    plan = {"goal": "start", "items": [item("a", "echo secret > a.txt", "test -f a.txt")]}
    async with a2a_client(server.url, key=alice) as client:
        first = await wait_for(client, (await send(client, data_message({"plan": plan}))).id)
    later = {"goal": "peek", "items": [item("b", "cat a.txt", "true")]}
    async with a2a_client(server.url, key=bob) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await send(client, data_message({"plan": later, "workspace": {"fromTask": first.id}}))
        # The same answer as for an id that never existed: nothing says alice's task is there.
        with pytest.raises(InvalidParamsError) as unknown:
            await send(client, data_message({"plan": later, "workspace": {"fromTask": "nope"}}))
    assert str(refused.value).replace(first.id, "ID") == str(unknown.value).replace("nope", "ID")
    assert rows(server.env["DATABASE_URL"], "SELECT count(*) FROM tasks") == [(1,)]
