"""The MCP door's 2025-11-25 task form, through the client that speaks it: the TypeScript MCP
SDK 1.x (from the npm registry; VS Code's Copilot Chat is built on it). Its `callToolStream`
asks for `delegate` as a task because the door says it may be one; the task it makes is the A2A
task the same key reads. And the same requests sent by hand where the client has no way to send
them wrong: bad params, a task that is not there, a cursor this server did not give."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.clients.harness import CANCELED, COMPLETED, Served, items_done, record, run_node_driver
from tests.clients.test_mcp import plan, quick

pytestmark = pytest.mark.clients
LEGACY = "2025-11-25"


def test_the_typescript_sdk_runs_delegate_as_a_2025_task(served: Served) -> None:
    scenarios = {
        "approve": {
            "args": {"plan": plan("sdk 1.x", quick("a"), quick("b", irreversible=True))},
            "answer": "approve",
        },
        "cancel": {
            "args": {"plan": plan("sdk 1.x cancel", quick("c", run="sleep 30"))},
            "cancelOnStatus": "working",
            "cancelAgain": True,
        },
        "plain": {"args": {"plan": plan("sdk 1.x plain", quick("d"))}, "plain": True},
    }
    results = run_node_driver("mcp_2025", "drive_sdk_tasks.mjs", served, scenarios)

    assert results["protocol"] == LEGACY
    assert results["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    assert results["delegate"] == {"taskSupport": "optional"}

    approved = results["approve"]
    assert "thrown" not in approved, approved.get("thrown")
    assert approved["messages"][0] == "taskCreated", approved
    assert approved["statuses"][-2:] == ["input_required", "completed"], approved
    # At the question, tasks/result says what is asked and how to answer it...
    asked = approved["asked"]["content"][0]["text"]
    assert "Item `b`" in asked and "answer_task" in asked, asked
    assert approved["answered"]["status"] == "working"
    # ...and at the end it is the tool's result: the report.
    end = approved["result"]
    assert (
        end["isError"] is False and end["content"][0]["text"] == "2 of 2 items done and verified."
    )
    assert end["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == approved["taskId"]

    cancelled = results["cancel"]
    assert cancelled["cancelled"]["status"] == "cancelled", cancelled
    assert "was cancelled" in cancelled["error"]["message"], cancelled
    # A cancel of an ended task is refused, saying how it ended.
    assert cancelled["cancelAgain"]["code"] == -32602
    assert "has ended (canceled)" in cancelled["cancelAgain"]["message"]

    plain = results["plain"]["plain"]  # a call without `task` is answered at once, as before
    assert "get_task" in plain, plain
    plain_id = plain.split()[1]

    # tasks/list: the caller's own tasks, each the A2A task the same key reads.
    listed = {t["taskId"]: t["status"] for t in results["list"]}
    assert listed[approved["taskId"]] == "completed"
    assert listed[cancelled["taskId"]] == "cancelled" and plain_id in listed
    assert items_done(await_record(served, approved["taskId"])) == ["a", "b"]
    assert await_record(served, cancelled["taskId"]).status.state == CANCELED


def await_record(served: Served, task_id: str) -> Any:
    task = asyncio.run(record(served, task_id))
    assert task.status.state in (COMPLETED, CANCELED)
    return task


def _call(served: Served, method: str, params: dict[str, Any], key: str | None = None) -> Any:
    headers = {
        "Authorization": f"Bearer {key or served.key}",
        "MCP-Protocol-Version": LEGACY,
        "Accept": "application/json, text/event-stream",
    }
    message = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(f"{served.url}/mcp", json=message, headers=headers, timeout=30).json()


def test_2025_task_requests_a_client_gets_wrong_are_refused_saying_why(served: Served) -> None:
    no_id = _call(served, "tasks/get", {})
    assert no_id["error"]["code"] == -32602 and "taskId" in no_id["error"]["message"]
    missing = _call(served, "tasks/result", {"taskId": "nope"})
    assert missing["error"]["code"] == -32602 and "no task 'nope'" in missing["error"]["message"]
    cursor = _call(served, "tasks/list", {"cursor": "not-ours"})
    assert cursor["error"]["code"] == -32602 and "not one this server issued" in str(cursor)
    not_a_task = _call(
        served, "tools/call", {"name": "get_task", "arguments": {"task_id": "x"}, "task": {}}
    )
    assert "call it without `task`" in not_a_task["error"]["message"]

    # A plan that is not one: a tool error a person (or a model) can act on, no task made.
    # (The module's other tasks may still be running: their ids are compared, not states.)
    def listed() -> list[str]:
        return [t["taskId"] for t in _call(served, "tasks/list", {})["result"]["tasks"]]

    before = listed()
    empty = {"plan": {"goal": "x", "items": []}}
    bad = _call(served, "tools/call", {"name": "delegate", "arguments": empty, "task": {}})
    assert bad["result"]["isError"] is True and "items" in bad["result"]["content"][0]["text"]
    assert listed() == before


def test_tasks_result_waits_for_a_working_task_to_end(served: Served) -> None:
    # The TS client asks for the result only once the task has ended; another client may ask
    # at once, and gets the report when the run is done, not the task as it is now.
    work = {"plan": plan("result waits", quick("slow", run="sleep 2; echo slow > slow.txt"))}
    made = _call(served, "tools/call", {"name": "delegate", "arguments": work, "task": {}})
    task_id = made["result"]["task"]["taskId"]
    assert made["result"]["task"]["status"] == "working"
    result = _call(served, "tasks/result", {"taskId": task_id})["result"]
    assert result["isError"] is False
    assert result["content"][0]["text"] == "1 of 1 items done and verified."
    assert result["structuredContent"]["state"] == "completed"
