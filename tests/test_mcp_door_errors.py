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

import httpx
import httpx2
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from a2a_agent.mcp_door.doorway import Door, Doorway
from persistence.records import TaskPage
from persistence.watch import PostgresWatchdogStore
from tests.clients.test_mcp import TasksExtension
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
async def mcp_client(
    app: InProcess, key: str, mode: str = "2026-07-28", extensions: list[Any] | None = None
) -> AsyncIterator[Client]:
    """The `mcp` SDK's client on the app in process, with the key."""
    # The SDK's client speaks through httpx2 (its fork of httpx), which has the same transport.
    transport = httpx2.ASGITransport(app=app.app)
    headers = {"Authorization": f"Bearer {key}"}
    http = httpx2.AsyncClient(transport=transport, base_url=BASE_URL, headers=headers, timeout=30)
    async with (
        http,
        Client(
            streamable_http_client(f"{BASE_URL}/mcp", http_client=http),
            mode=mode,
            extensions=extensions or [],
        ) as client,
    ):
        yield client


async def task_count(app: InProcess) -> int:
    async with app.runtime.pool.connection() as conn:
        row = await (await conn.execute("SELECT count(*) AS n FROM tasks")).fetchone()
    assert row is not None
    return int(row["n"])


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
        # An argument the tool does not take (pydantic dropped it without a word: a misspelt
        # budget ran the task with none) is refused by name, with the ones it takes.
        takes = "it takes `goal`, `plan`, `workspace`, `budget`, `publish`"
        result = await client.call_tool("delegate", {"plan": PLAN, "bugdet": {"maxUsd": 1}})
        assert result.is_error
        assert text(result) == f"delegate: `bugdet` is not an argument of this tool; {takes}"
        result = await client.call_tool("get_task", {"task_id": "t", "id": "t", "x": 1})
        assert text(result) == (
            "get_task: `id`, `x` are not arguments of this tool; it takes `task_id`"
        )
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert all(t.input_schema["additionalProperties"] is False for t in listed.values())
        # Nothing was made of the refused delegate.
        assert await task_count(app) == 0
        # A plan's own fields are checked by the service, which already says it in words.
        bad = {**PLAN, "items": [{**PLAN["items"][0], "maxAttempts": "x"}]}
        result = await client.call_tool("delegate", {"plan": bad})
        assert result.is_error and text(result).startswith("delegate: plan.items[0].maxAttempts")
        assert "must be a whole number" in text(result)


async def test_a_task_made_by_a_tool_call_refuses_an_unknown_argument(
    door: tuple[InProcess, str],
) -> None:
    # A `delegate` answered with a task (the tasks extension, or 2025-11-25's `task` field)
    # is made from the arguments as sent, past the tool's own check: refused there the same.
    app, key = door
    takes = "it takes `goal`, `plan`, `workspace`, `budget`, `publish`"
    async with mcp_client(app, key, extensions=[TasksExtension()]) as client:
        result = await client.session.call_tool(
            "delegate", {"plan": PLAN, "bugdet": {"maxUsd": 1}}, allow_claimed=True
        )
        assert isinstance(result, types.CallToolResult) and result.is_error
        assert text(result) == f"delegate: `bugdet` is not an argument of this tool; {takes}"
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": "2025-11-25"}
    arguments = {"plan": PLAN, "bugdet": {"maxUsd": 1}}
    message = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "delegate", "arguments": arguments, "task": {"ttl": 60000}},
    }
    response = await app.http.post("/mcp", json=message, headers={**headers, **JSON_OR_SSE})
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["content"][0]["text"] == (
        f"delegate: `bugdet` is not an argument of this tool; {takes}"
    )
    assert await task_count(app) == 0


async def delegated(client: Any) -> str:
    """The id of a task `delegate` made of PLAN (its text names it second)."""
    made = await client.call_tool("delegate", {"plan": PLAN})
    return text(made).split()[1]


async def test_a_cancel_of_a_task_that_had_ended_is_a_tool_error(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    async with mcp_client(app, key) as client:
        task_id = await delegated(client)
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
        task_id = await delegated(client)
        before = json.loads(text(await client.call_tool("get_task", {"task_id": task_id})))
        await asyncio.sleep(0.05)  # the cancel is a later change than the submission
        canceled = json.loads(text(await client.call_tool("cancel_task", {"task_id": task_id})))
        after = json.loads(text(await client.call_tool("get_task", {"task_id": task_id})))
    # createdAt: when it was submitted; lastUpdatedAt: the cancel. Every view says the same.
    assert canceled["createdAt"] == before["createdAt"] == after["createdAt"]
    assert canceled["lastUpdatedAt"] == after["lastUpdatedAt"]
    at = {k: datetime.fromisoformat(canceled[k]) for k in ("createdAt", "lastUpdatedAt")}
    assert at["lastUpdatedAt"] > at["createdAt"]


LIMITED = {**KEYED, "A2A_AGENT_MAX_MESSAGE_BYTES": "1024", "A2A_AGENT_MAX_INPUT_BYTES": "1024"}
PING = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
JSON_OR_SSE = {"Accept": "application/json, text/event-stream"}


def assert_mcp_error(response: httpx.Response, status: int, said: str, code: int = -32600) -> None:
    """A JSON-RPC error object, as an MCP client reads one, with the refusal's HTTP status."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body.keys() == {"jsonrpc", "id", "error"} and body["jsonrpc"] == "2.0", body
    assert body["id"] is None  # refused before the body was read
    assert body["error"]["code"] == code and said in body["error"]["message"], body


async def test_the_door_refuses_an_mcp_request_in_json_rpc(database_url: str, home: Path) -> None:
    async with in_process(database_url, home, LIMITED) as app:
        key = (home / "admin.key").read_text().strip()
        post = app.http.post
        nokey = await post("/mcp", json=PING, headers=JSON_OR_SSE)
        assert_mcp_error(nokey, 401, "an API key is required")
        assert nokey.headers["www-authenticate"] == 'Bearer realm="a2a-agent"'
        wrong = await post("/mcp", json=PING, headers={"Authorization": "Bearer a2a_0_x"})
        assert_mcp_error(wrong, 401, "this API key is not valid")
        auth = {"Authorization": f"Bearer {key}", **JSON_OR_SSE}
        typed = await post(
            "/mcp", content=json.dumps(PING), headers={**auth, "Content-Type": "text/plain"}
        )
        assert_mcp_error(typed, 415, "send the request body as JSON")
        # A2A's own JSON type is JSON the SDK does not take: refused here, in the same form.
        a2a_typed = await post(
            "/mcp",
            content=json.dumps(PING),
            headers={**auth, "Content-Type": "application/a2a+json"},
        )
        assert_mcp_error(a2a_typed, 415, "(got 'application/a2a+json')")
        large = {**PING, "params": {"pad": "x" * 100_000}}
        assert_mcp_error(await post("/mcp", json=large, headers=auth), 413, "larger than")
        # The A2A endpoint's refusals stay in A2A's forms.
        a2a = await post("/", json=PING, headers={"A2A-Version": "1.0"})
        assert a2a.status_code == 401 and a2a.json()["error"]["data"][0]["reason"]


async def test_a_body_over_the_sdk_own_limit_reaches_the_tool(door: tuple[InProcess, str]) -> None:
    # The SDK's transport refused a body over 4 MiB with a plain-text 413 before the door's
    # limit (larger: it carries files) could; the door's limit is the only one now, and a
    # delegate that large is refused by the service, saying what is too large, as a tool error.
    app, key = door
    call = {
        "jsonrpc": "2.0",
        "id": 9,
        "method": "tools/call",
        "params": {"name": "delegate", "arguments": {"goal": "x" * (5 << 20)}},
    }
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": "2025-11-25"}
    response = await app.http.post("/mcp", json=call, headers={**headers, **JSON_OR_SSE})
    assert response.status_code == 200, response.text[:300]
    result = response.json()["result"]
    said = result["content"][0]["text"]
    assert result["isError"] is True and said.startswith("delegate: the message is "), said[:300]
    assert "accepts at most" in said


async def test_a_door_closed_for_the_shutdown_says_so_in_json_rpc() -> None:
    def build() -> Door:
        raise AssertionError("a closed door is not built")

    doorway = Doorway(build)
    async with doorway.lifespan():
        pass
    transport = httpx.ASGITransport(app=doorway)
    async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as http:
        response = await http.post("/mcp", json=PING)
    assert_mcp_error(response, 503, "shutting down", code=-32603)


async def test_an_unknown_protocol_version_is_named_with_those_spoken(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    call = {"jsonrpc": "2.0", "id": 12, "method": "tools/list", "params": {}}
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": "2024-01-01"}
    response = await app.http.post("/mcp", json=call, headers={**headers, **JSON_OR_SSE})
    assert response.status_code == 400
    body = response.json()
    assert body["id"] == 12 and body["error"]["code"] == -32022  # UNSUPPORTED_PROTOCOL_VERSION
    said = body["error"]["message"]
    assert said.startswith("MCP-Protocol-Version '2024-01-01' is not a version this server"), said
    assert "speaks 2026-07-28 (named in each request's _meta) and 2025-11-25, " in said
    assert body["error"]["data"]["requested"] == "2024-01-01"
    assert {"2026-07-28", "2025-11-25"} <= set(body["error"]["data"]["supported"])
    # A version it speaks is served as before.
    known = await app.http.post(
        "/mcp", json=call, headers={**headers, "MCP-Protocol-Version": "2025-11-25", **JSON_OR_SSE}
    )
    assert known.status_code == 200 and known.json()["result"]["tools"]


async def test_a_method_other_than_post_is_answered_at_once(door: tuple[InProcess, str]) -> None:
    # The door is stateless: a GET was an SSE stream the SDK held open with nothing ever on
    # it (no status line through a buffering client, the connection held), and a DELETE was
    # told "Session termination not supported" with no Allow. Each is 405, Allow: POST.
    app, key = door
    auth = {"Authorization": f"Bearer {key}"}
    sse = {**auth, "Accept": "text/event-stream"}
    for method, headers, said in [
        ("GET", sse, "opens no SSE stream on GET"),
        ("GET", {**sse, "MCP-Protocol-Version": "2025-11-25"}, "opens no SSE stream on GET"),
        ("GET", {**sse, "MCP-Protocol-Version": "2026-07-28"}, "opens no SSE stream on GET"),
        ("DELETE", auth, "keeps no sessions, so there is none to end"),
        ("PUT", {**auth, "Content-Type": "application/json"}, "PUT is not a method of"),
    ]:
        response = await asyncio.wait_for(app.http.request(method, "/mcp", headers=headers), 10)
        assert_mcp_error(response, 405, said)
        assert response.headers["allow"] == "POST"
    # Without a key the key is asked for first; and the SDK's client still works (a client
    # of 2025-11-25 tries a GET stream after initialize, and takes the 405).
    assert_mcp_error(await app.http.get("/mcp"), 401, "an API key is required")
    async with mcp_client(app, key, mode="legacy") as client:
        assert {tool.name for tool in (await client.list_tools()).tools} >= {"delegate"}


async def test_a_task_pruned_while_tasks_list_shapes_its_page_is_left_out(
    door: tuple[InProcess, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The retention may delete an ended task after the listing read its page and before the
    # page is shaped (each task's createdAt is read then): the whole list failed, saying
    # "there is no task ... of yours". The task that went is left out; the others are listed.
    app, key = door
    headers = {"Authorization": f"Bearer {key}", "MCP-Protocol-Version": "2025-11-25"}

    async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
        response = await app.http.post("/mcp", json=message, headers={**headers, **JSON_OR_SSE})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def delegate(arguments: dict[str, Any], word: int) -> str:
        made = await call("tools/call", {"name": "delegate", "arguments": arguments})
        return str(made["result"]["content"][0]["text"].split()[word])

    kept = {await delegate({"plan": PLAN}, 1), await delegate({"plan": {**PLAN, "goal": "b"}}, 1)}
    # A goal, and no model here: refused at once, so a task that ended, which retention deletes.
    ended = await delegate({"goal": "write me a poem"}, 2)
    store = app.runtime.store
    listing = store.list_tasks
    pruned: list[tuple[str, int]] = []

    async def list_then_prune(owner: str, **kwargs: Any) -> TaskPage:
        page = await listing(owner, **kwargs)
        pruned.extend(await PostgresWatchdogStore(app.runtime.pool).prune_tasks(0, 10))
        return page

    monkeypatch.setattr(store, "list_tasks", list_then_prune)
    listed = await call("tasks/list", {})
    assert [task_id for task_id, _ in pruned] == [ended]  # read with the page, then deleted
    assert "error" not in listed, listed
    tasks = listed["result"]["tasks"]
    assert {t["taskId"] for t in tasks} == kept and len(tasks) == 2
    assert all(t["status"] == "working" and t["createdAt"] for t in tasks), tasks
