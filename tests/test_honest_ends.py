"""An honest record at every end, through the A2A client: a canceled run leaves no item
`in_progress` (the interrupted one says so, with its attempt), and the reply to a steering
note says it was taken and who reads it."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path

from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_message, plan_of, report_of, send
from tests.support.fake_anthropic import FakeAnthropic, model_env
from tests.support.processes import AgentProcess, StartAgent


async def _closed(client: Client, task_id: str, timeout: float = 60) -> Task:
    """The task once its run wrote its closing record (the report is there)."""
    deadline = time.monotonic() + timeout
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        if any(a.artifact_id == "report" for a in task.artifacts):
            return task
        assert time.monotonic() < deadline, "the run never closed its record"
        await asyncio.sleep(0.2)


async def _until_item(client: Client, task_id: str, item_id: str, status: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        task = await client.get_task(GetTaskRequest(id=task_id))
        items = {i["id"]: i for i in plan_of(task)["items"]} if task.artifacts else {}
        if items.get(item_id, {}).get("status") == status:
            return
        assert time.monotonic() < deadline, f"item {item_id} never {status}"
        await asyncio.sleep(0.1)


def _note(task_id: str, text: str) -> SendMessageRequest:
    message = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=task_id, parts=[Part(text=text)]
    )
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )


async def test_a_cancel_mid_command_leaves_the_item_interrupted_not_in_progress(
    start_agent: StartAgent, home: Path
) -> None:
    server: AgentProcess = start_agent("serve", "honest-1")
    async with a2a_client(server.url) as client:
        plan = [
            item("slow", {"command": "sleep 60", "timeoutS": 120}, "true", precheck=False),
            item("after", "true", "true"),
        ]
        task = await send(client, plan_message(plan))
        await _until_item(client, task.id, "slow", "in_progress")
        await asyncio.sleep(1)  # the command is running
        await client.cancel_task(CancelTaskRequest(id=task.id))
        ended = await _closed(client, task.id)
    assert ended.status.state == TaskState.TASK_STATE_CANCELED
    items = {i["id"]: i for i in plan_of(ended)["items"]}
    assert items["slow"]["status"] == "interrupted", items["slow"]
    attempt = items["slow"]["history"][-1]
    assert attempt["outcome"].startswith("interrupted: "), attempt
    assert items["after"]["status"] == "pending"
    assert not [i for i in items.values() if i["status"] == "in_progress"]
    report = report_of(ended)
    assert report["itemsInterrupted"] == ["slow"], report
    assert "interrupted (under way when the run ended): slow" in report["summary"]
    workspace = home / "workspaces" / task.id
    on_disk = json.loads((workspace / "plan.json").read_text())
    assert {i["id"]: i["status"] for i in on_disk["items"]} == {
        "slow": "interrupted",
        "after": "pending",
    }
    progress = (workspace / "progress.md").read_text()
    assert "- Next: nothing: the run ended while item `slow` was under way" in progress
    assert "in_progress -> interrupted" in progress
    # A cancel that went as planned is no error.
    errors = [line for line in server.log().splitlines() if " ERROR " in line]
    assert errors == [], errors


async def test_the_reply_to_a_note_says_it_was_taken_and_who_reads_it(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    server = start_agent("serve", "honest-2", **model_env(fake))
    async with a2a_client(server.url) as client:
        commands_only = [item("slow", {"command": "sleep 60", "timeoutS": 120}, "true")]
        worked = await send(client, plan_message(commands_only))
        modelled = [
            item("first", {"command": "sleep 60", "timeoutS": 120}, "true", precheck=False),
            {"id": "model", "title": "Write the docs", "verify": "test -s docs.md"},
        ]
        by_model = await send(client, plan_message(modelled))
        for task in (worked, by_model):
            await _until_item(client, task.id, plan_of(task)["items"][0]["id"], "in_progress")
        replies = {}
        for task in (worked, by_model):
            async for response in client.send_message(_note(task.id, "use tabs, not spaces")):
                replies[task.id] = MessageToDict(response.task)["metadata"]["note"]
                break
        for task in (worked, by_model):
            await client.cancel_task(CancelTaskRequest(id=task.id))
    nobody = replies[worked.id]
    assert nobody["text"] == "use tabs, not spaces" and nobody["readBy"] == "nobody", nobody
    assert "no model reads it" in nobody["goes"] and "run" in nobody["goes"]
    model = replies[by_model.id]
    assert model["readBy"] == "model" and "item `model`" in model["goes"], model
    assert fake.request_count == 0  # nothing was asked of the model to say so
