"""The MCP door through real MCP clients: the `mcp` SDK's Python client (2026-07-28, with and
without the tasks extension) and the TypeScript `@modelcontextprotocol/ext-tasks` client (from
the npm registry). Each delegates a plan, follows it to its end, answers its approval, cancels;
the task each makes is the A2A task the same key reads, with its record."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import httpx
import pytest
from mcp import Client, types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from tests.clients.harness import (
    CANCELED,
    COMPLETED,
    Served,
    items_done,
    record,
    run_node_driver,
    workspace_commits,
)

pytestmark = pytest.mark.clients
TASKS = "io.modelcontextprotocol/tasks"
RAW = TypeAdapter(dict[str, Any])


class TaskIdParams(types.RequestParams):
    task_id: str


class UpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


class GetTask(types.Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskIdParams
    name_param = "taskId"


class UpdateTask(types.Request[UpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateParams
    name_param = "taskId"


class CancelTask(types.Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams
    name_param = "taskId"


class CreateTaskResult(types.Result):
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    status_message: str | None = None


async def _unclaimed(claimed: CreateTaskResult, context: ClaimContext) -> types.CallToolResult:
    raise AssertionError("these tests take the task itself (allow_claimed=True)")


class TasksExtension(ClientExtension):
    """Declares the tasks extension on every request, so `delegate` answers with a task."""

    identifier = TASKS

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_unclaimed)]


@asynccontextmanager
async def mcp_client(
    served: Served, *, tasks: bool, key: str | None = None, mode: str = "2026-07-28"
) -> AsyncIterator[Any]:
    given = key or served.key  # a server without keys (the test default) takes none
    headers = {"Authorization": f"Bearer {given}"} if given else {}
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(f"{served.url}/mcp", http_client=http)
        extensions = [TasksExtension()] if tasks else []
        async with Client(transport, mode=mode, extensions=extensions) as client:
            yield client


def plan(goal: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"goal": goal, "items": list(items)}


def quick(item_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": item_id,
        "title": item_id,
        "run": f"echo {item_id} > {item_id}.txt",
        "verify": f"test -s {item_id}.txt",
        **extra,
    }


async def poll(client: Any, task_id: str, answer: dict[str, Any] | None = None) -> list[Any]:
    """tasks/get until the task ends, answering each new request once; every answer seen."""
    seen: list[Any] = []
    answered: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        got = await client.session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), RAW)
        seen.append(got)
        if got["status"] in ("completed", "failed", "cancelled"):
            return seen
        new = {k: answer for k in got.get("inputRequests") or {} if k not in answered}
        if new and answer is not None:
            params = UpdateParams(task_id=task_id, input_responses=new)
            await client.session.send_request(UpdateTask(params=params), RAW)
            answered |= set(new)
        await asyncio.sleep(0.2)
    raise AssertionError(f"task {task_id} did not end: {seen[-1]}")


async def test_the_sdk_client_delegates_answers_and_reads_the_report(served: Served) -> None:
    async with mcp_client(served, tasks=True) as client:
        listed = await client.list_tools()
        tools = {t.name: t for t in listed.tools}
        assert set(tools) >= {"delegate", "get_task", "answer_task", "cancel_task"}
        # The tool's schema is the one /schemas serves.
        served_plan = httpx.get(f"{served.url}/schemas/plan.v1.json").json()
        assert tools["delegate"].input_schema["properties"]["plan"] == served_plan

        work = plan("mcp sdk", quick("one"), quick("two", irreversible=True))
        created = await client.session.call_tool("delegate", {"plan": work}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult) and created.status == "working"
        approve = {"action": "accept", "content": {"decision": "approve", "note": "go"}}
        seen = await poll(client, created.task_id, approve)

    asked = next(s for s in seen if s["status"] == "input_required")
    (key, request) = next(iter(asked["inputRequests"].items()))
    assert key == "irreversible.two" and request["method"] == "elicitation/create"
    assert asked["statusMessage"].startswith("Waiting for you: Item `two`")
    assert "DataPart" not in asked["statusMessage"]  # the A2A way to reply is not said here
    schema = request["params"]["requestedSchema"]["properties"]["decision"]
    assert schema["enum"] == ["approve", "skip", "reject"]
    end = seen[-1]
    assert end["status"] == "completed" and end["result"]["isError"] is False
    assert end["result"]["content"][0]["text"] == "2 of 2 items done and verified."
    # The MCP task is the A2A task: the same key reads it, with its plan done and committed.
    task = await record(served, created.task_id)
    assert task.status.state == COMPLETED and items_done(task) == ["one", "two"]
    assert len(workspace_commits(served, created.task_id)) >= 2


async def test_a_retried_call_makes_one_task_and_a_cancel_stops_it(served: Served) -> None:
    call = {
        "jsonrpc": "2.0",
        "id": 41,
        "method": "tools/call",
        "params": {
            "name": "delegate",
            "arguments": {"plan": plan("retried", quick("slow", run="sleep 30"))},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {served.key}",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "delegate",
        "Accept": "application/json, text/event-stream",
    }
    made = [httpx.post(f"{served.url}/mcp", json=call, headers=headers).json() for _ in range(2)]
    assert made[0]["result"]["resultType"] == "task"
    assert made[0]["result"]["taskId"] == made[1]["result"]["taskId"]
    task_id = made[0]["result"]["taskId"]
    async with mcp_client(served, tasks=True) as client:
        await client.session.send_request(CancelTask(params=TaskIdParams(task_id=task_id)), RAW)
        seen = await poll(client, task_id)
        assert seen[-1]["status"] == "cancelled"
        with pytest.raises(MCPError) as missing:
            await client.session.send_request(GetTask(params=TaskIdParams(task_id="nope")), RAW)
        assert (
            missing.value.error.code == -32602 and "no task 'nope'" in missing.value.error.message
        )
    assert (await record(served, task_id)).status.state == CANCELED


# A client of MCP 2025-11-25 that does not ask for a task (the handshake alone) polls with the
# tools too; the 2025-11-25 task form has its own tests (test_mcp_2025.py).
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_client_without_the_extension_polls_with_tools(served: Served, mode: str) -> None:
    async with mcp_client(served, tasks=False, mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode != "legacy" else "2025-11-25")
        work = plan("plain mcp", quick("first", irreversible=True))
        said = await client.call_tool("delegate", {"plan": work})
        text = said.content[0].text
        task_id = text.split()[1]
        assert not said.is_error and f"get_task (task_id '{task_id}')" in text
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = json.loads(
                (await client.call_tool("get_task", {"task_id": task_id})).content[0].text
            )
            if now["status"] == "input_required":
                break
            await asyncio.sleep(0.2)
        (key,) = now["inputRequests"]
        answered = await client.call_tool(
            "answer_task", {"task_id": task_id, "request_id": key, "decision": "skip"}
        )
        assert not answered.is_error
        again = await client.call_tool(
            "answer_task", {"task_id": task_id, "request_id": key, "decision": "maybe"}
        )
        # One answer per request: the same one again is a retry, another is refused, saying why.
        assert again.is_error and "already decided: skip" in again.content[0].text
        retried = await client.call_tool(
            "answer_task", {"task_id": task_id, "request_id": key, "decision": "skip"}
        )
        assert not retried.is_error
        # A plan that is not one is refused as a tool error a person (or a model) can act on.
        bad = await client.call_tool("delegate", {"plan": {"goal": "x", "items": []}})
        assert bad.is_error and "items" in bad.content[0].text
        # A goal this server has no model for: refused at once, and the call says why.
        poem = await client.call_tool("delegate", {"goal": "write me a poem"})
        said = poem.content[0].text
        assert poem.is_error and " is rejected: " in said and "model" in said, said
    task = await record(served, task_id)
    assert task.status.state == COMPLETED


async def test_the_door_needs_a_key(served: Served) -> None:
    response = httpx.post(f"{served.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
    assert response.status_code == 401


def test_the_typescript_ext_tasks_client(served: Served) -> None:
    scenarios = {
        "approve": {
            "args": {"plan": plan("ext-tasks", quick("a"), quick("b", irreversible=True))},
            "answer": {"action": "accept", "content": {"decision": "approve"}},
        },
        "decline": {
            "args": {"plan": plan("ext-tasks declined", quick("c", irreversible=True))},
            "answer": {"action": "decline"},
        },
        "cancel": {
            "args": {"plan": plan("ext-tasks cancel", quick("d", run="sleep 30"))},
            "cancelOnStatus": "working",
        },
    }
    results = run_node_driver("mcp", "drive_ext_tasks.mjs", served, scenarios)

    approved = results["approve"]
    assert approved["kind"] == "task" and approved["outcome"] == "completed", approved
    assert approved["inputRequests"][0]["key"] == "irreversible.b"
    assert "input_required" in approved["statuses"]
    assert approved["result"]["isError"] is False
    declined = results["decline"]
    assert declined["outcome"] == "completed" and declined["result"]["isError"] is True, declined
    assert results["cancel"]["outcome"] == "cancelled", results["cancel"]


def _modern(method: str, name: str | None = None) -> dict[str, str]:
    headers = {
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": method,
        "Accept": "application/json, text/event-stream",
    }
    return {**headers, "Mcp-Name": name} if name else headers


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
}


async def test_a_listening_client_is_told_each_change_of_its_tasks(served: Served) -> None:
    async with mcp_client(served, tasks=True) as client:
        work = plan("listened", quick("long", run="sleep 30"))
        created = await client.session.call_tool("delegate", {"plan": work}, allow_claimed=True)
    task_id = created.task_id
    auth = {"Authorization": f"Bearer {served.key}"}
    listen = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": [task_id, "not-mine"]}, "_meta": MODERN_META},
    }
    frames: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=served.url, timeout=60, headers=auth) as http:
        headers = _modern("subscriptions/listen")
        async with http.stream("POST", "/mcp", json=listen, headers=headers) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            async for line in stream.aiter_lines():
                if not line.startswith("data:"):
                    continue
                frames.append(json.loads(line[5:]))
                if frames[-1].get("method") == "notifications/subscriptions/acknowledged":
                    cancel = {
                        "jsonrpc": "2.0",
                        "id": 6,
                        "method": "tasks/cancel",
                        "params": {"taskId": task_id, "_meta": MODERN_META},
                    }
                    done = await http.post(
                        "/mcp", json=cancel, headers=_modern("tasks/cancel", task_id)
                    )
                    assert "result" in done.json(), done.text
                if "result" in frames[-1]:
                    break
    ack, *told, end = frames
    assert ack["params"]["notifications"] == {"taskIds": [task_id]}  # not another's task
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 5
    assert told and all(f["method"] == "notifications/tasks" for f in told)
    assert told[-1]["params"]["taskId"] == task_id
    assert told[-1]["params"]["status"] == "cancelled"
    assert end["id"] == 5 and end["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 5
