"""The door, where it needs a real server: the key before a body a real socket is still
sending, streams of a running task with ids and resume on both bindings and versions, a
blocking send at an interrupted state, follow-ups and a 0.3 round trip. What needs no run is
in tests/edge/test_door.py, in process; the refusal table there is shared from here."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import AgentProcess, serving
from tests.test_auth import make_key

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
V10 = {"A2A-Version": "1.0"}
BIG = 20 * 1024 * 1024


pytestmark = pytest.mark.served  # every test here drives the module's server


@pytest.fixture(scope="module")
def server(module_place: tuple[str, Path]) -> Iterator[AgentProcess]:
    env = {"A2A_AGENT_INSECURE_OPEN": "0", "A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1"}
    database_url, home = module_place
    with serving(database_url, home, "door", **env) as process:
        yield process


@pytest.fixture(scope="module")
def key(server: AgentProcess) -> str:
    return (Path(server.env["A2A_AGENT_HOME"]) / "admin.key").read_text().strip()


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def plan_part(*items: dict[str, Any], v03: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"data": {"plan": {"goal": "door test", "items": list(items)}}}
    if v03:
        part["kind"] = "data"
    return part


def quick_item(item_id: str = "a") -> dict[str, Any]:
    return {
        "id": item_id,
        "title": item_id,
        "run": f"echo {item_id} > {item_id}.txt",
        "verify": f"test -s {item_id}.txt",
    }


def ask_item() -> dict[str, Any]:
    return {"id": "q", "title": "Which colour?", "ask": "Which colour should it be?"}


def slow_item(seconds: int) -> dict[str, Any]:
    return {
        "id": "slow",
        "title": "slow",
        "run": f"sleep {seconds}",
        "verify": "true",
        "precheck": False,
    }


def send_rpc(
    server: AgentProcess,
    key: str,
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    return httpx.post(
        server.url + "/", json=body, headers={**auth(key), **(headers or {})}, timeout=60
    )


def new_task_v10(server: AgentProcess, key: str, *items: dict[str, Any]) -> dict[str, Any]:
    params = {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [plan_part(*items)],
        },
        "configuration": {"returnImmediately": True},
    }
    reply = send_rpc(server, key, "SendMessage", params, headers=V10).json()
    assert "result" in reply, reply
    task: dict[str, Any] = reply["result"]["task"]
    return task


def wait_state(
    server: AgentProcess, key: str, task_id: str, states: set[str], timeout: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = send_rpc(server, key, "GetTask", {"id": task_id}, headers=V10).json()["result"]
        if task["status"]["state"] in states:
            return dict(task)
        assert time.monotonic() < deadline, f"task {task_id} is {task['status']['state']}"
        time.sleep(0.1)


def assert_jsonrpc_error(
    response: httpx.Response, code: int, *, v03: bool = False, says: str = ""
) -> dict[str, Any]:
    body = response.json()
    assert body.get("jsonrpc") == "2.0" and "id" in body, body
    error: dict[str, Any] = body["error"]
    assert error["code"] == code, body
    assert says in error["message"], body
    if not v03:  # A2A 1.0: the ErrorInfo in data, as the SDK sends it
        assert error["data"][0]["@type"] == ERROR_INFO, body
    return error


def assert_rest_error(
    response: httpx.Response, status: int, reason: str, *, says: str = ""
) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]  # AIP-193
    assert error["code"] == status and isinstance(error["status"], str), error
    assert says in error["message"], error
    info = error["details"][0]
    assert info["@type"] == ERROR_INFO and info["reason"] == reason, error
    return error


# ---- the key comes first ------------------------------------------------------------------


def _answer_before_body(
    url: str, path: str, headers: dict[str, str], size: int = BIG
) -> tuple[bytes, float]:
    """Send the head of a request announcing a body of `size` bytes, and only its first KiB; the
    answer (if it comes while the rest is unsent) shows the server did not read the body."""
    host, port = url.removeprefix("http://").split(":")
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {host}:{port}",
        f"Content-Length: {size}",
        "Content-Type: application/json",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        started = time.monotonic()
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + b"[" * 1024)
        answer = sock.recv(65536)
        took = time.monotonic() - started
        head, _, body = answer.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:  # the head and the body may come in two packets
            more = sock.recv(65536)
            if not more:
                break
            body += more
        return head + b"\r\n\r\n" + body, took


def _rss_kb(pid: int) -> int:
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total = int(line.split()[1])
    return total


def _server_pids(server: AgentProcess) -> list[int]:
    assert server.proc is not None
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text()
    return [server.proc.pid, *(int(p) for p in children.split())]


def test_a_keyless_20_mb_body_gets_401_without_the_server_reading_it(
    server: AgentProcess, key: str
) -> None:
    for _ in range(20):  # warm: the first requests of a fresh process grow it anyway
        httpx.post(server.url + "/", json={}, headers=V10)
    rss_before = sum(_rss_kb(pid) for pid in _server_pids(server))
    tiny_started = time.monotonic()
    tiny = httpx.post(server.url + "/", json={}, headers=V10)
    tiny_s = time.monotonic() - tiny_started
    assert tiny.status_code == 401
    for path, headers in (
        ("/", V10),
        ("/", {}),
        ("/message:send", V10),
        ("/v1/message:send", {}),
        ("/", {**V10, "Authorization": "Bearer a2a_000000000000_wrong"}),
    ):
        answer, took = _answer_before_body(server.url, path, headers)
        assert answer.startswith(b"HTTP/1.1 401"), (path, answer[:200])
        # The refusal is the protocol's error object, not a text.
        body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
        error = body["error"]
        assert isinstance(error, dict) and "API key" in error["message"], body
        print(f"401 for a 20 MB body at {path}: {took * 1000:.1f} ms (tiny: {tiny_s * 1000:.1f})")
    rss_after = sum(_rss_kb(pid) for pid in _server_pids(server))
    print(f"server RSS {rss_before} kB -> {rss_after} kB")
    # Five 20 MB bodies buffered would be 100 MB; none was read.
    assert rss_after - rss_before < 16 * 1024


def test_a_body_over_the_limit_is_refused_from_its_length_before_it_is_read(
    server: AgentProcess, key: str
) -> None:
    answer, _ = _answer_before_body(server.url, "/", {**V10, **auth(key)}, size=100 << 20)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    error = json.loads(answer.split(b"\r\n\r\n", 1)[1])["error"]
    assert error["code"] == -32600 and "larger than" in error["message"], error


# ---- every refusal in the request's protocol ----------------------------------------------


REFUSALS: list[tuple[str, dict[str, str], bytes, int, int, str, str]] = [
    # (what, headers, body, http status for REST, JSON-RPC code, REST reason, words)
    (
        "no key",
        {"Content-Type": "application/json", "Authorization": ""},
        b"{}",
        401,
        -32600,
        "UNAUTHENTICATED",
        "API key",
    ),
    (
        "wrong key",
        {"Content-Type": "application/json", "Authorization": "Bearer a2a_000000000000_nope"},
        b"{}",
        401,
        -32600,
        "UNAUTHENTICATED",
        "not valid",
    ),
    (
        "a form",
        {"Content-Type": "text/plain"},
        b"{}",
        415,
        -32005,
        "CONTENT_TYPE_NOT_SUPPORTED",
        "application/json",
    ),
    (
        "not UTF-8",
        {"Content-Type": "application/json"},
        b'{"a": "\xff"}',
        400,
        -32700,
        "INVALID_REQUEST",
        "UTF-8",
    ),
    (
        "too deep",
        {"Content-Type": "application/json"},
        b"[" * 100 + b"]" * 100,
        400,
        -32700,
        "INVALID_REQUEST",
        "nests deeper",
    ),
    (
        "NaN",
        {"Content-Type": "application/json"},
        b'{"params": {"x": NaN}}',
        400,
        -32602,
        "INVALID_PARAMS",
        "NaN",
    ),
    (
        "a lone surrogate",
        {"Content-Type": "application/json"},
        b'{"params": {"id": "\\ud800"}}',
        400,
        -32602,
        "INVALID_PARAMS",
        "surrogate",
    ),
    (
        "a version that is none",
        {"Content-Type": "application/json", "A2A-Version": "one"},
        b"{}",
        400,
        -32009,
        "VERSION_NOT_SUPPORTED",
        "A2A-Version",
    ),
    (
        "a version from the future",
        {"Content-Type": "application/json", "A2A-Version": "2.0"},
        b"{}",
        400,
        -32009,
        "VERSION_NOT_SUPPORTED",
        "1.0 (send A2A-Version: 1.0) and 0.3 (send no A2A-Version header)",
    ),
    (
        "another Host",
        {"Content-Type": "application/json", "Host": "evil.example"},
        b"{}",
        400,
        -32600,
        "INVALID_HOST",
        "Host",
    ),
]


# ---- bindings without a body ---------------------------------------------------------------


def test_bodyless_posts_where_the_binding_has_no_body(server: AgentProcess, key: str) -> None:
    task = new_task_v10(server, key, slow_item(30))
    wait_state(server, key, task["id"], {"TASK_STATE_WORKING"})
    # The SDK's REST client resubscribes with a POST without body or type.
    with (
        httpx.Client(timeout=30) as http,
        http.stream(
            "POST", f"{server.url}/tasks/{task['id']}:subscribe", headers={**auth(key), **V10}
        ) as stream,
    ):
        assert stream.status_code == 200, stream.read()
        first = next(line for line in stream.iter_lines() if line.startswith("data:"))
        assert json.loads(first[5:])["task"]["id"] == task["id"]
    canceled = httpx.post(
        f"{server.url}/tasks/{task['id']}:cancel", headers={**auth(key), **V10}, timeout=30
    )
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED"
    # A chunked POST without a type may carry anything: refused as before.
    chunked = httpx.post(
        f"{server.url}/tasks/{task['id']}:cancel",
        content=iter([b"{}"]),
        headers={**auth(key), **V10},
    )
    assert_rest_error(chunked, 415, "CONTENT_TYPE_NOT_SUPPORTED")


def test_a_0_3_rest_cancel_without_a_body(server: AgentProcess, key: str) -> None:
    task = new_task_v10(server, key, slow_item(30))
    wait_state(server, key, task["id"], {"TASK_STATE_WORKING"})
    canceled = httpx.post(f"{server.url}/v1/tasks/{task['id']}:cancel", headers=auth(key))
    assert canceled.status_code == 200, canceled.text
    # 0.3's REST binding writes its protobuf's enum names.
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELLED"


# ---- stream ids and resume on both bindings --------------------------------------------------


def _sse(response: httpx.Response) -> Iterator[tuple[str | None, dict[str, Any]]]:
    event_id: str | None = None
    for line in response.iter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            yield event_id, json.loads(line[5:])
            event_id = None


STREAMS = {
    # binding/version: (method, url path, body maker, headers)
    "jsonrpc-1.0": ("POST", "/", "SubscribeToTask", V10),
    "jsonrpc-0.3": ("POST", "/", "tasks/resubscribe", {}),
    "rest-1.0": ("GET", "/tasks/{id}:subscribe", None, V10),
    "rest-0.3": ("GET", "/v1/tasks/{id}:subscribe", None, {}),
}


def _subscribe(  # noqa: PLR0917
    http: httpx.Client,
    server: AgentProcess,
    key: str,
    kind: str,
    task_id: str,
    last: str | None = None,
) -> Any:
    verb, path, method, headers = STREAMS[kind]
    sent = {**auth(key), **headers, **({"Last-Event-ID": last} if last else {})}
    if method is None:
        return http.stream(verb, server.url + path.format(id=task_id), headers=sent)
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": task_id}}
    return http.stream(verb, server.url + path, json=body, headers=sent)


@pytest.mark.parametrize("kind", list(STREAMS))
def test_every_stream_frame_has_an_id_and_a_reconnect_resumes_after_it(
    server: AgentProcess, key: str, kind: str
) -> None:
    items = [
        {**quick_item("a"), "run": "sleep 1; echo a > a.txt"},
        {**quick_item("b"), "run": "sleep 1; echo b > b.txt"},
    ]
    task = new_task_v10(server, key, *items)
    with httpx.Client(timeout=60) as http:
        with _subscribe(http, server, key, kind, task["id"]) as stream:
            assert stream.status_code == 200, stream.read()
            seen: list[str] = []
            for event_id, _ in _sse(stream):
                assert event_id is not None and event_id.startswith(task["id"] + ":")
                seen.append(event_id)
                if len(seen) == 3:
                    break
        wait_state(server, key, task["id"], {"TASK_STATE_COMPLETED"})
        # A reconnect with the last id gets exactly the events after it, in order, to the end.
        with _subscribe(http, server, key, kind, task["id"], last=seen[-1]) as stream:
            assert stream.status_code == 200, stream.read()
            rest = [event_id for event_id, _ in _sse(stream)]
    numbers = [int(x.rsplit(":", 1)[1]) for x in seen + [r for r in rest if r]]
    assert numbers == sorted(set(numbers)), numbers
    assert rest and rest[0] is not None and all(r is not None for r in rest), rest
    assert int(rest[0].rsplit(":", 1)[1]) == int(seen[-1].rsplit(":", 1)[1]) + 1


# ---- sends: blocking at an interrupted state, reused ids, retries ---------------------------


def test_a_blocking_send_returns_at_an_interrupted_state_and_so_does_its_retry(
    server: AgentProcess, key: str
) -> None:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [plan_part(ask_item())],
    }
    first = send_rpc(server, key, "SendMessage", {"message": message}, headers=V10).json()
    assert first["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", first
    started = time.monotonic()
    again = send_rpc(server, key, "SendMessage", {"message": message}, headers=V10).json()
    assert time.monotonic() - started < 5
    assert again["result"]["task"]["id"] == first["result"]["task"]["id"]
    assert again["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert again["result"]["task"]["metadata"]["retry"]["messageId"] == message["messageId"]
    # The same over 0.3 (blocking is 0.3's default).
    message03 = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [plan_part(ask_item(), v03=True)],
    }
    for _ in range(2):
        old = send_rpc(server, key, "message/send", {"message": message03}).json()
        assert old["result"]["status"]["state"] == "input-required", old


def test_a_follow_up_reusing_a_message_id_for_other_content_is_refused(
    server: AgentProcess, key: str
) -> None:
    task = new_task_v10(server, key, slow_item(30))
    first_id = task["history"][0]["messageId"]
    other = {
        "messageId": first_id,
        "role": "ROLE_USER",
        "taskId": task["id"],
        "parts": [{"text": "a different note"}],
    }
    refused = send_rpc(server, key, "SendMessage", {"message": other}, headers=V10)
    assert_jsonrpc_error(refused, -32602, says="already used for a different message")
    note = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "taskId": task["id"],
        "parts": [{"text": "a note"}],
    }
    # returnImmediately: a blocking send would wait for the 30 s item to end (A2A 1.0 §3.2.2).
    taken = {"message": note, "configuration": {"returnImmediately": True}}
    assert "result" in send_rpc(server, key, "SendMessage", taken, headers=V10).json()
    # The same note again is a retry: fine. Other words under its id: refused.
    assert "result" in send_rpc(server, key, "SendMessage", taken, headers=V10).json()
    changed = {**note, "parts": [{"text": "another note"}]}
    refused = send_rpc(server, key, "SendMessage", {"message": changed}, headers=V10)
    assert_jsonrpc_error(refused, -32602, says="already used for a different message")
    send_rpc(server, key, "CancelTask", {"id": task["id"]}, headers=V10)


async def test_the_card_serves_0_3_and_1_0(server: AgentProcess) -> None:
    async with httpx.AsyncClient() as http:
        card = (await http.get(server.url + "/.well-known/agent-card.json")).json()
    assert card["protocolVersion"] == "0.3" and card["url"] == server.url + "/"
    assert card["preferredTransport"] == "JSONRPC"
    versions = {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]}
    assert versions == {
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("JSONRPC", "0.3"),
        ("HTTP+JSON", "0.3"),
    }
    await asyncio.sleep(0)


# ---- A2A 0.3 through everything of ours ------------------------------------------------------


def test_0_3_calls_get_scopes_the_idempotent_message_id_and_replies(
    server: AgentProcess, key: str
) -> None:
    reader = make_key(server, "door-reader", "read")
    message = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [plan_part(ask_item(), v03=True)],
    }
    refused = send_rpc(server, reader, "message/send", {"message": message})
    assert_jsonrpc_error(refused, -32600, v03=True, says="lacks the 'submit' scope")
    params = {"message": message, "configuration": {"blocking": False}}
    first = send_rpc(server, key, "message/send", params).json()["result"]
    again = send_rpc(server, key, "message/send", params).json()["result"]
    assert again["id"] == first["id"] and again["kind"] == "task"
    other = {**message, "parts": [{"kind": "text", "text": "something else"}]}
    reused = send_rpc(server, key, "message/send", {"message": other})
    assert_jsonrpc_error(reused, -32602, v03=True, says="already used for a different message")
    waiting = wait_state(server, key, first["id"], {"TASK_STATE_INPUT_REQUIRED"})
    assert waiting["id"] == first["id"]
    got = send_rpc(server, key, "tasks/get", {"id": first["id"]}).json()["result"]
    assert got["status"]["state"] == "input-required"
    answer = {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "taskId": first["id"],
        "parts": [{"kind": "text", "text": "blue"}],
    }
    replied = send_rpc(server, key, "message/send", {"message": answer}).json()["result"]
    assert replied["status"]["state"] == "completed", replied
    workspace = Path(server.env["A2A_AGENT_HOME"]) / "workspaces" / first["id"]
    assert "blue" in (workspace / "answers" / "q.md").read_text()
