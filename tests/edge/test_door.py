"""The door, in process: the app under httpx's ASGI transport on a real PostgreSQL, with a
recording fake for the run engine. What needs no run is shown here: the key before the body,
every early refusal in the request's protocol, bodyless POSTs, content types, retries, and
0.3 calls through scopes and the idempotent messageId. (tests/test_door.py keeps what needs
a process: a real socket, streams of a running task, a blocking send.)"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from starlette.types import Message

from a2a_agent.edge.auth import new_key
from tests.support.in_process import BASE_URL, InProcess, in_process
from tests.test_door import (
    ERROR_INFO,
    REFUSALS,
    V10,
    assert_jsonrpc_error,
    assert_rest_error,
    plan_part,
    quick_item,
)

KEYED = {"A2A_AGENT_INSECURE_OPEN": "0", "A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1"}


@pytest.fixture
async def door(database_url: str, home: Path) -> AsyncIterator[tuple[InProcess, str]]:
    async with in_process(database_url, home, KEYED) as app:
        key = (home / "admin.key").read_text().strip()
        yield app, key


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def rpc(
    app: InProcess, key: str, method: str, params: dict[str, Any], **headers: str
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return await app.http.post("/", json=body, headers={**auth(key), **headers})


async def test_the_key_is_checked_before_a_byte_of_the_body_is_read(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    for path, headers in (
        ("/", {"a2a-version": "1.0"}),
        ("/v1/message:send", {}),
        ("/message:send", {"a2a-version": "1.0", "authorization": "Bearer a2a_000000000000_x"}),
    ):
        received: list[Message] = []
        sent: list[Message] = []

        async def receive(seen: list[Message] = received) -> Message:
            seen.append({"type": "http.request"})
            return {"type": "http.request", "body": b"[" * 1024, "more_body": True}

        async def send(message: Message, sink: list[Message] = sent) -> None:
            sink.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 5000),
            "headers": [
                (b"host", b"127.0.0.1:8000"),
                (b"content-type", b"application/json"),
                (b"content-length", str(20 << 20).encode()),
                *((k.encode(), v.encode()) for k, v in headers.items()),
            ],
        }
        await app.app(scope, receive, send)
        assert received == [], path  # answered without reading the body
        assert sent[0]["status"] == 401, (path, sent)
    assert key


@pytest.mark.parametrize("version", ["1.0", "0.3"])
@pytest.mark.parametrize(
    ("what", "headers", "body", "status", "code", "reason", "says"),
    REFUSALS,
    ids=[r[0] for r in REFUSALS],
)
async def test_every_refusal_at_the_door_is_a_protocol_error_object(  # noqa: PLR0917
    door: tuple[InProcess, str],
    version: str,
    what: str,
    headers: dict[str, str],
    body: bytes,
    status: int,
    code: int,
    reason: str,
    says: str,
) -> None:
    app, key = door
    sent = {k: v for k, v in {"Authorization": f"Bearer {key}", **headers}.items() if v}
    sent.setdefault("Host", "127.0.0.1:8000")
    if version == "1.0" and "A2A-Version" not in sent:
        sent["A2A-Version"] = "1.0"
    rest_path = "/message:send" if version == "1.0" else "/v1/message:send"
    assert_rest_error(await app.http.post(rest_path, content=body, headers=sent), status, reason,
                      says=says)  # fmt: skip
    answer = await app.http.post("/", content=body, headers=sent)
    assert answer.status_code in (200, status), answer.text
    v03 = "A2A-Version" not in sent
    expected = code if not v03 or code != -32009 else -32603  # 0.3 has no -32009
    assert_jsonrpc_error(answer, expected, v03=v03, says=says)
    assert not await app.runs_to_start()  # nothing got as far as a run


JSON_TYPE = "application/json"


@pytest.mark.parametrize(
    ("value", "says"), [("NaN", "NaN"), ('"\\udc00 and \\ud83d\\ude00"', "\\udc00")]
)
async def test_a_refusal_of_a_read_body_echoes_the_calls_id(
    door: tuple[InProcess, str], value: str, says: str
) -> None:
    """A number JSON cannot carry, or a lone surrogate (which reached the database driver:
    a 500), is refused once the body is read; the answer carries the call's id (it was
    null), so a client can match it to its request."""
    app, key = door
    body = f'{{"jsonrpc": "2.0", "id": "c-7", "method": "GetTask", "params": {{"id": {value}}}}}'
    for headers in (V10, {}):
        answer = await app.http.post(
            "/", content=body.encode(), headers={**auth(key), **headers, "Content-Type": JSON_TYPE}
        )
        assert answer.json()["id"] == "c-7", answer.text
        assert_jsonrpc_error(answer, -32602, v03=not headers, says=says)


async def test_a_file_of_a_type_the_card_does_not_list(door: tuple[InProcess, str]) -> None:
    app, key = door
    card = (await app.http.get("/.well-known/agent-card.json")).json()
    assert "application/x-unsupported-tck-type" not in card["defaultInputModes"]
    assert {"application/zip", "image/*", "text/*"} <= set(card["defaultInputModes"])
    part = {"raw": "dGNr", "mediaType": "application/x-unsupported-tck-type"}
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [part]}
    answer = await rpc(app, key, "SendMessage", {"message": message}, **V10)
    error = assert_jsonrpc_error(answer, -32005, says="x-unsupported-tck-type")
    assert error["data"][0]["@type"] == ERROR_INFO
    rest = await app.http.post(
        "/message:send",
        json={"message": {**message, "messageId": str(uuid.uuid4())}},
        headers={**auth(key), **V10},
    )
    assert_rest_error(rest, 400, "CONTENT_TYPE_NOT_SUPPORTED", says="x-unsupported-tck-type")
    part03 = {"kind": "file", "file": {"bytes": "dGNr", "mimeType": part["mediaType"]}}
    message03 = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user",
                 "parts": [part03]}  # fmt: skip
    old = await rpc(app, key, "message/send", {"message": message03})
    assert_jsonrpc_error(old, -32005, v03=True, says="x-unsupported-tck-type")
    assert not await app.runs_to_start()


async def test_bodyless_posts_and_the_retry_that_adds_a_push_config(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
               "parts": [plan_part(quick_item())]}  # fmt: skip
    params: dict[str, Any] = {"message": message, "configuration": {"returnImmediately": True}}
    first = (await rpc(app, key, "SendMessage", params, **V10)).json()["result"]["task"]
    assert await app.runs_to_start() == [first["id"]]
    hook = {"url": "http://127.0.0.1:9/a2a", "id": "retry-hook"}
    params["configuration"]["taskPushNotificationConfig"] = hook
    again = (await rpc(app, key, "SendMessage", params, **V10)).json()["result"]["task"]
    assert again["metadata"]["retry"]["pushConfig"] == {"id": "retry-hook",
                                                        "outcome": "registered"}  # fmt: skip
    third = (await rpc(app, key, "SendMessage", params, **V10)).json()["result"]["task"]
    assert third["metadata"]["retry"]["pushConfig"]["outcome"] == "alreadyRegistered"
    assert await app.runs_to_start() == [first["id"]]  # a retry makes no second run
    # The SDK's REST client cancels (and resubscribes) with a POST without body or type.
    canceled = await app.http.post(f"/tasks/{first['id']}:cancel", headers={**auth(key), **V10})
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    assert app.engine.canceled == [first["id"]]

    async def chunks() -> AsyncIterator[bytes]:
        yield b"{}"

    chunked = await app.http.post(
        f"/tasks/{first['id']}:cancel", content=chunks(), headers={**auth(key), **V10}
    )
    assert_rest_error(chunked, 415, "CONTENT_TYPE_NOT_SUPPORTED")
    # Deleting a push config twice succeeds (A2A 1.0 3.1.10).
    for _ in range(2):
        deleted = await rpc(
            app, key, "DeleteTaskPushNotificationConfig",
            {"taskId": first["id"], "id": "retry-hook"}, **V10,
        )  # fmt: skip
        assert "result" in deleted.json(), deleted.text


async def test_0_3_calls_through_scopes_and_the_idempotent_message_id(
    door: tuple[InProcess, str],
) -> None:
    app, key = door
    token, stored = new_key("door-reader", ("read",))
    await app.runtime.keys.create(stored)
    message = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user",
               "parts": [plan_part(quick_item(), v03=True)]}  # fmt: skip
    refused = await rpc(app, token, "message/send", {"message": message})
    assert_jsonrpc_error(refused, -32600, v03=True, says="lacks the 'submit' scope")
    params = {"message": message, "configuration": {"blocking": False}}
    first = (await rpc(app, key, "message/send", params)).json()["result"]
    again = (await rpc(app, key, "message/send", params)).json()["result"]
    assert again["id"] == first["id"] and again["kind"] == "task"
    assert again["status"]["state"] == "submitted"
    other = {**message, "parts": [{"kind": "text", "text": "something else"}]}
    reused = await rpc(app, key, "message/send", {"message": other})
    assert_jsonrpc_error(reused, -32602, v03=True, says="already used for a different message")
    got = (await rpc(app, key, "tasks/get", {"id": first["id"]})).json()["result"]
    assert got["kind"] == "task" and got["id"] == first["id"]
    assert await app.runs_to_start() == [first["id"]]
    assert BASE_URL.startswith("http://127.0.0.1")


async def test_a_path_no_route_takes_is_told_where_the_endpoints_are(
    door: tuple[InProcess, str],
) -> None:
    """Starlette answered these in plain text ("Not Found", "Method Not Allowed"), which no
    A2A client parses, and `/anything` was first a 307 to `/anything/`."""
    app, key = door
    headers = {**auth(key), **V10}
    for path in ("/nope", "/tasks/", "/v1/nope"):
        answer = await app.http.get(path, headers=headers)
        assert answer.status_code == 404, (path, answer.status_code, answer.headers)
        assert_rest_error(answer, 404, "NOT_FOUND", says="agent-card.json")
    wrong = await app.http.delete("/tasks/x", headers=headers)
    assert_rest_error(wrong, 404, "NOT_FOUND", says="DELETE /tasks/x is no endpoint")
    rpc_get = await app.http.get("/", headers=headers)
    assert_rest_error(rpc_get, 405, "METHOD_NOT_ALLOWED", says="does not take GET; it takes POST")
    assert rpc_get.headers["allow"] == "POST"
    page = await app.http.get("/ui/nope", headers=headers)  # a browser's: plain text, as it was
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/plain")


async def test_a_refused_inline_push_config_leaves_no_task(
    door: tuple[InProcess, str], database_url: str
) -> None:
    """Its URL was checked before the task was made, its token only after: a NUL in the
    token was refused, and the task stayed stored, never started."""
    app, key = door
    config = {"url": "http://127.0.0.1:9/hook", "token": "a\u0000b"}
    message = {"messageId": "m-inline", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    params = {"message": message, "configuration": {"taskPushNotificationConfig": config}}
    answer = await rpc(app, key, "SendMessage", params, **V10)
    assert_jsonrpc_error(answer, -32602, says="the token contains a NUL character")
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT count(*) FROM messages WHERE message_id = 'm-inline'")
        assert stored.fetchone() == (0,)
