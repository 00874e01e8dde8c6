"""What the MCP door tells a caller that got something wrong, in process: the app under httpx's
ASGI transport on a real PostgreSQL (`tests/support/in_process.py`), called with the `mcp`
SDK's own client and with raw HTTP. No run is needed: a delegated task is stored and waits
for a worker that is not there, so it can be cancelled; one cancelled is a task that ended."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from tests.support.in_process import BASE_URL, InProcess, in_process

KEYED = {"A2A_AGENT_INSECURE_OPEN": "0"}
PLAN: dict[str, Any] = {
    "goal": "wait",
    "items": [{"id": "a", "title": "a", "run": "true", "verify": "true"}],
}


@pytest.fixture
async def door(database_url: str, home: Path) -> AsyncIterator[tuple[InProcess, str]]:
    async with in_process(database_url, home, KEYED) as app:
        yield app, (home / "admin.key").read_text().strip()


@asynccontextmanager
async def mcp_client(app: InProcess, key: str, mode: str = "2026-07-28") -> AsyncIterator[Client]:
    """The `mcp` SDK's client on the app in process, with the key."""
    # The SDK's client speaks through httpx2 (its fork of httpx), which has the same transport.
    transport = httpx2.ASGITransport(app=app.app)
    headers = {"Authorization": f"Bearer {key}"}
    http = httpx2.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers, timeout=30)
    async with (
        http,
        Client(streamable_http_client(f"{BASE_URL}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def text(result: types.CallToolResult) -> str:
    (content,) = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def plain(said: str) -> None:
    """No pydantic report in what a caller is told."""
    for mark in ("validation error", "pydantic", "http", "input_value", "Error executing"):
        assert mark not in said, said


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_tool_refuses_its_arguments_in_words(
    door: tuple[InProcess, str], mode: str
) -> None:
    app, key = door
    async with mcp_client(app, key, mode) as client:
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("get_task", {}, "get_task: `task_id` is required (the id delegate returned)"),
            ("get_task", {"task_id": 5}, "get_task: `task_id` must be a string; got 5"),
            ("cancel_task", {"task_id": None}, "cancel_task: `task_id` must be a string; got null"),
            (
                "answer_task",
                {"task_id": "t", "decision": ["approve"]},
                "answer_task: `request_id` is required (its key in the task's inputRequests); "
                "`decision` must be a string; got a list",
            ),
            (
                "delegate",
                {"plan": "do it"},
                'delegate: `plan` must be an object; got the string "do it"',
            ),
            ("delegate", {"goal": True}, "delegate: `goal` must be a string; got true"),
            # What the door itself refuses says so in the same form.
            ("get_task", {"task_id": "nope"}, "get_task: there is no task 'nope' of yours"),
        ]
        for tool, arguments, expected in cases:
            result = await client.call_tool(tool, arguments)
            assert result.is_error, (tool, arguments)
            assert text(result) == expected
            plain(text(result))
        # A plan's own fields are checked by the service, which already says it in words.
        bad = {**PLAN, "items": [{**PLAN["items"][0], "maxAttempts": "x"}]}
        result = await client.call_tool("delegate", {"plan": bad})
        assert result.is_error and text(result).startswith("delegate: plan.items[0].maxAttempts")
        assert "must be a whole number" in text(result)


async def test_a_cancel_of_a_task_that_had_ended_is_a_tool_error(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    async with mcp_client(app, key) as client:
        made = await client.call_tool("delegate", {"plan": PLAN})
        task_id = text(made).split()[1]
        first = await client.call_tool("cancel_task", {"task_id": task_id})
        # A running task is stopped: a success, with the task as it is now.
        assert not first.is_error and json.loads(text(first))["status"] == "cancelled"
        again = await client.call_tool("cancel_task", {"task_id": task_id})
        assert again.is_error
        assert text(again).startswith(
            f"cancel_task: task {task_id} had already ended (canceled) before this cancel; "
            "nothing was canceled."
        )
        # A task the service refused at once (a goal, and no model here) had ended too.
        poem = await client.call_tool("delegate", {"goal": "write me a poem"})
        rejected = text(poem).split()[2]
        late = await client.call_tool("cancel_task", {"task_id": rejected})
        assert late.is_error and f"{rejected} had already ended (rejected)" in text(late)


async def test_a_cancelled_task_was_created_before_it_was_last_updated(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    async with mcp_client(app, key) as client:
        made = await client.call_tool("delegate", {"plan": PLAN})
        task_id = text(made).split()[1]
        before = json.loads(text(await client.call_tool("get_task", {"task_id": task_id})))
        await asyncio.sleep(0.05)  # the cancel is a later change than the submission
        canceled = json.loads(text(await client.call_tool("cancel_task", {"task_id": task_id})))
        after = json.loads(text(await client.call_tool("get_task", {"task_id": task_id})))
    # createdAt: when it was submitted; lastUpdatedAt: the cancel. Every view says the same.
    assert canceled["createdAt"] == before["createdAt"] == after["createdAt"]
    assert canceled["lastUpdatedAt"] == after["lastUpdatedAt"]
    at = {k: datetime.fromisoformat(canceled[k]) for k in ("createdAt", "lastUpdatedAt")}
    assert at["lastUpdatedAt"] > at["createdAt"]
