"""The short send, in process: `FastSends` stores and answers a new task's plain SendMessage
without reaching the app behind it, with the answer the SDK's route gives; everything else,
refusals included, passes on with nothing stored."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from starlette.authentication import AuthCredentials, UnauthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.fast_sends import FastSends
from tests.edge.test_fast_reads import LONG_WAY, _behind
from tests.support.db import connection
from tests.support.in_process import InProcess, in_process

V10 = {"A2A-Version": "1.0"}
JSON = {"Content-Type": "application/json"}
# The SDK's route takes the version with its patch number; the short path passes it on.
SDK_V10 = {"A2A-Version": "1.0.0"}
PLAN = {"goal": "g", "items": [{"id": "a", "title": "A", "run": "true", "verify": "true",
                               "maxAttempts": 2}]}  # fmt: skip
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+Z")


def _message(**extra: Any) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
            "parts": [{"data": {"plan": PLAN}}], **extra}  # fmt: skip


def _send(message: dict[str, Any], request_id: object = 7, **config: Any) -> dict[str, Any]:
    params = {"message": message, "configuration": {"returnImmediately": True, **config}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "SendMessage", "params": params}


def _open(fast: FastSends, scopes: list[str]) -> ASGIApp:
    """As the key check leaves a request for an open server: anyone, with `scopes`."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["user"], scope["auth"] = UnauthenticatedUser(), AuthCredentials(scopes)
        await fast(scope, receive, send)

    return app


def _shape(answer: dict[str, Any]) -> str:
    """The answer with what differs between two sends of the same message (ids, times) made
    alike, keys in order (a Struct's keys come out in an order of their own)."""
    text = json.dumps(answer, sort_keys=True)
    return STAMP.sub("<time>", UUID.sub("<id>", text))


def _tasks(served: InProcess) -> int:
    row = connection(served.runtime.conninfo).execute("SELECT count(*) FROM tasks").fetchone()
    return int(row[0]) if row else 0


async def test_a_plain_send_is_stored_and_answered_without_the_app_behind(
    database_url: str, home: Path
) -> None:
    passed: list[str] = []
    async with in_process(database_url, home) as served:
        fast = FastSends(_behind(passed), served.app.state.handler, path="/")
        transport = httpx.ASGITransport(app=_open(fast, ["submit", "run", "read"]))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            answer = await http.post("/", json=_send(_message(), "req-1"), headers=V10)
        assert answer.status_code == 200 and passed == []
        assert answer.headers["content-type"] == "application/json"
        task = answer.json()["result"]["task"]
        assert answer.json()["id"] == "req-1"
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert await served.runs_to_start() == [task["id"]]


async def test_the_answer_is_the_one_the_sdks_route_gives(database_url: str, home: Path) -> None:
    """The same message sent both ways (a messageId each), the first at once and a second
    time (a retry, whose answer says so); with and without a history length."""
    async with in_process(database_url, home) as served:
        http = served.http
        for config in ({}, {"historyLength": 0}, {"acceptedOutputModes": ["text/plain"]}):
            answers = []
            for headers in (V10, SDK_V10):
                message = _message(contextId="ctx-1")
                first = await http.post("/", json=_send(message, **config), headers=headers)
                again = await http.post("/", json=_send(message, **config), headers=headers)
                answers.append([first.json(), again.json()])
            (fast_first, fast_again), (sdk_first, sdk_again) = answers
            assert "task" in fast_first["result"], fast_first
            assert _shape(fast_first) == _shape(sdk_first)
            assert _shape(fast_again) == _shape(sdk_again)
            assert fast_again["result"]["task"]["metadata"]["retry"]["messageId"]
        assert _tasks(served) == 6


async def test_everything_else_passes_on_and_a_refusal_stores_nothing(
    database_url: str, home: Path
) -> None:
    passed: list[str] = []
    async with in_process(database_url, home) as served:
        task_id = (await served.http.post("/", json=_send(_message()), headers=V10)).json()[
            "result"
        ]["task"]["id"]
        stored = _tasks(served)
        handler = served.app.state.handler
        blocking = _send(_message())
        del blocking["params"]["configuration"]
        streaming = _send(_message()) | {"method": "SendStreamingMessage"}
        push = {"url": "https://example.com/hook"}
        others: list[tuple[dict[str, Any], dict[str, str]]] = [
            (blocking, V10),
            (_send(_message(), returnImmediately=False), V10),
            (_send(_message(taskId=task_id)), V10),  # a follow-up
            (_send(_message(), taskPushNotificationConfig=push), V10),
            (streaming, V10),
            (_send(_message()), {}),  # 0.3
            (_send(_message()), SDK_V10),
            (_send(_message(parts="not a list")), V10),  # the SDK's parser says why
            (_send(_message()) | {"id": True}, V10),
        ]
        fast = FastSends(_behind(passed), handler, path="/")
        transport = httpx.ASGITransport(app=_open(fast, ["submit", "run", "read"]))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            for body, headers in others:
                answer = await http.post("/", json=body, headers=headers)
                assert answer.status_code == LONG_WAY, body
        assert len(passed) == len(others)
        assert _tasks(served) == stored


async def test_a_refusal_is_the_sdks_own_and_stores_nothing(database_url: str, home: Path) -> None:
    """The handler's refusal, answered on the short path with the SDK's own error builder:
    the same answer as the SDK's route gives, and nothing stored either way."""
    bad_plan = [{"data": {"plan": {"goal": "g", "items": [{"id": "a", "command": "x"}]}}}]
    passed: list[str] = []
    async with in_process(database_url, home) as served:
        answers = []
        for headers in (V10, SDK_V10):
            sent = await served.http.post(
                "/", json=_send(_message(parts=bad_plan)), headers=headers
            )
            answers.append(sent.json())
        assert answers[0] == answers[1]
        assert answers[0]["error"]["code"] == -32602 and "command" in answers[0]["error"]["message"]
        # A key that may submit but not run commands: refused where it is, nothing stored.
        refused = FastSends(_behind(passed), served.app.state.handler, path="/")
        transport = httpx.ASGITransport(app=_open(refused, ["submit", "read"]))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            answer = await http.post("/", json=_send(_message(), "r-1"), headers=V10)
        assert answer.status_code == 200 and passed == []
        error = answer.json()["error"]
        assert answer.json()["id"] == "r-1" and error["code"] == -32600
        assert "'run' scope" in error["message"]
        assert _tasks(served) == 0


async def test_a_failure_inside_the_short_send_is_left_to_the_sdks_route() -> None:
    """Not a 500: the long way answers it (as a JSON-RPC error, when it fails there too)."""

    async def failing(request: Any, context: Any) -> Any:
        raise RuntimeError("a bug")

    passed: list[str] = []
    handler: Any = SimpleNamespace(submit=failing)
    transport = httpx.ASGITransport(app=_open(FastSends(_behind(passed), handler), ["submit"]))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        answer = await http.post("/", json=_send(_message()), headers=V10)
    assert answer.status_code == LONG_WAY and passed == ["POST /"]


async def test_the_body_of_a_short_send_is_parsed_once(
    database_url: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The door parses a JSON-RPC body for its checks; the short send takes what it found
    instead of parsing the same bytes again (it did, a second time, on every send)."""
    parsed: list[bytes] = []
    loads = json.loads

    def counting(text: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(text, bytes | bytearray):
            parsed.append(bytes(text))
        return loads(text, *args, **kwargs)

    async with in_process(database_url, home) as served:
        monkeypatch.setattr(json, "loads", counting)
        body = json.dumps(_send(_message(), "req-2")).encode()
        answer = await served.http.post("/", content=body, headers={**V10, **JSON})
        monkeypatch.undo()
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert parsed.count(body) == 1
