"""What the door answers for the SDK, on a real server: an A2A 0.3 call with bad params
(-32602 naming the field, not pydantic's dump and a logged traceback); a JSON-RPC
notification (no answer: 204, and what changes something is done once)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.processes import AgentProcess, serving

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

pytestmark = pytest.mark.served


@pytest.fixture(scope="module")
def server(module_place: tuple[str, Path]) -> Iterator[AgentProcess]:
    with serving(*module_place, "door-calls") as process:
        yield process


def tasks_of(process: AgentProcess, message_id: str) -> list[str]:
    """The tasks made from the message `message_id` (a retried messageId makes none)."""
    with psycopg.connect(process.env["DATABASE_URL"]) as conn:
        rows = conn.execute(
            "SELECT task_id FROM messages WHERE message_id = %s", (message_id,)
        ).fetchall()
    return [str(row[0]) for row in rows]


def post(process: AgentProcess, call: dict[str, Any], **headers: str) -> httpx.Response:
    return httpx.post(f"{process.url}/", json=call, headers=headers, timeout=30)


def part(text: str) -> dict[str, Any]:
    return {"kind": "text", "text": text}


def sent(message: dict[str, Any]) -> dict[str, Any]:
    return {"message": {"messageId": "m-1", "role": "user", "parts": [part("hi")], **message}}


BAD_V03: list[tuple[str, str, Any, str]] = [
    ("no parts", "message/send", {"message": {"messageId": "m", "role": "user"}},
     "params.message.parts is required"),
    ("bad role", "message/send", sent({"role": "robot"}),
     "params.message.role must be 'agent' or 'user' (got \"robot\")"),
    ("text part without text", "message/send", sent({"parts": [{"kind": "text"}]}),
     "params.message.parts[0].text is required"),
    ("unknown part kind", "message/send", sent({"parts": [{"kind": "image"}]}),
     "params.message.parts[0].kind must be 'text', 'file' or 'data' (got \"image\")"),
    ("file part without a file", "message/send", sent({"parts": [{"kind": "file", "file": {}}]}),
     "params.message.parts[0].file needs 'bytes' or 'uri'"),
    ("parts not a list", "message/stream", sent({"parts": "hello"}),
     "params.message.parts must be a list (got \"hello\")"),
    ("blocking not a boolean", "message/send", {**sent({}), "configuration": {"blocking": "x"}},
     "params.configuration.blocking must be true or false (got \"x\")"),
    ("get without id", "tasks/get", {}, "params.id is required"),
    ("get with a numeric id", "tasks/get", {"id": 5}, "params.id must be a string (got 5)"),
    ("params a list", "tasks/get", [], "params must be an object (got a list)"),
    ("cancel without params", "tasks/cancel", None, "params is required"),
    ("push config missing", "tasks/pushNotificationConfig/set", {"taskId": "t"},
     "params.pushNotificationConfig is required"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "method", "params", "expected"), BAD_V03, ids=[c[0] for c in BAD_V03]
)
def test_a_0_3_call_with_bad_params_is_told_which_field(
    server: AgentProcess, case: str, method: str, params: Any, expected: str
) -> None:
    """It was -32600 with pydantic's text (errors.pydantic.dev) and an ERROR with a
    traceback in the log, for each call."""
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": f"q-{case}", "method": method}
    if params is not None:
        call["params"] = params
    logged = len(server.log())
    response = post(server, call)
    answer = response.json()
    assert response.status_code == 200 and answer["id"] == f"q-{case}", answer
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert answer["error"]["message"] == f"invalid {method!r} call: {expected}"
    assert "data" not in answer["error"]  # no dump of the input beside the sentence
    assert "Traceback" not in server.log()[logged:]


def test_a_0_3_call_with_a_bad_id_is_an_invalid_request(server: AgentProcess) -> None:
    answer = post(server, {"jsonrpc": "2.0", "id": 1.5, "method": "tasks/get",
                           "params": {"id": "t"}}).json()  # fmt: skip
    assert answer["id"] is None and answer["error"]["code"] == INVALID_REQUEST
    assert answer["error"]["message"] == (
        "invalid 'tasks/get' call: id must be a string or a whole number (got 1.5)"
    )


def test_a_good_0_3_call_still_reaches_the_sdk(server: AgentProcess) -> None:
    answer = post(server, {"jsonrpc": "2.0", "id": 3, "method": "tasks/get",
                           "params": {"id": "no-such-task"}}).json()  # fmt: skip
    assert answer["id"] == 3 and answer["error"]["code"] == -32001


def test_a_1_0_call_with_bad_params_is_told_which_field_and_nothing_is_stored(
    server: AgentProcess,
) -> None:
    """It was -32602 "Invalid params" with protobuf's text in `data`, an ERROR with a
    traceback in the log, and a role protobuf does not know was dropped: the task was made."""
    logged = len(server.log())
    v10 = {"A2A-Version": "1.0"}
    got = post(
        server, {"jsonrpc": "2.0", "id": "g", "method": "GetTask", "params": {"id": 5}}, **v10
    )
    error = got.json()["error"]
    assert got.json()["id"] == "g" and error["code"] == INVALID_PARAMS
    assert error["message"] == "invalid 'GetTask' call: params.id must be a string (got 5)"
    assert error["data"][0]["reason"] == "INVALID_PARAMS"  # 1.0's ErrorInfo, as the SDK's
    robot = {"messageId": "m-robot", "role": "ROBOT", "parts": [{"data": {"plan": SLOW_PLAN}}]}
    sent = post(server, {"jsonrpc": "2.0", "id": 2, "method": "SendMessage",
                         "params": {"message": robot}}, **v10).json()  # fmt: skip
    assert sent["error"]["code"] == INVALID_PARAMS, sent
    assert "params.message.role must be ROLE_USER or ROLE_AGENT" in sent["error"]["message"]
    assert tasks_of(server, "m-robot") == []
    assert "Traceback" not in server.log()[logged:]


SLOW_PLAN = {"goal": "g", "items": [{"id": "a", "run": "sleep 30", "verify": "true"}]}


def message_v10(message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": {"plan": SLOW_PLAN}}]}


def message_v03(message_id: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "user",
            "parts": [{"kind": "data", "data": {"plan": SLOW_PLAN}}]}  # fmt: skip


V10 = {"A2A-Version": "1.0"}
NOTIFIED_SENDS = [
    ("SendMessage", message_v10, V10),
    ("SendStreamingMessage", message_v10, V10),
    ("message/send", message_v03, {}),
    ("message/stream", message_v03, {}),
]


@pytest.mark.parametrize(("method", "make", "headers"), NOTIFIED_SENDS,
                         ids=[s[0] for s in NOTIFIED_SENDS])  # fmt: skip
def test_a_notification_gets_no_answer_and_sends_once(
    server: AgentProcess, method: str, make: Callable[[str], dict[str, Any]],
    headers: dict[str, str],
) -> None:  # fmt: skip
    """It was answered as a call with `"id": null` (and refused at 0.3); a blocking send
    held the request until the task ended."""
    message_id = f"notified-{method}"
    started = time.monotonic()
    response = post(server, {"jsonrpc": "2.0", "method": method,
                             "params": {"message": make(message_id)}}, **headers)  # fmt: skip
    assert response.status_code == 204 and response.content == b""
    assert time.monotonic() - started < 15  # not the 30 s the task runs
    (task_id,) = tasks_of(server, message_id)
    # The same notification again is the same message: nothing more is made.
    post(server, {"jsonrpc": "2.0", "method": method,
                  "params": {"message": make(message_id)}}, **headers)  # fmt: skip
    assert tasks_of(server, message_id) == [task_id]
    cancel = post(server, {"jsonrpc": "2.0", "method": "CancelTask", "params": {"id": task_id}},
                  **V10)  # fmt: skip
    assert cancel.status_code == 204 and cancel.content == b""
    state = post(server, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                          "params": {"id": task_id}}, **V10).json()  # fmt: skip
    assert state["result"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_a_notification_that_reads_or_is_refused_runs_nothing(server: AgentProcess) -> None:
    calls: list[tuple[dict[str, Any], dict[str, str]]] = [
        ({"method": "GetTask", "params": {"id": "no-such-task"}}, V10),
        ({"method": "tasks/get", "params": {"id": "no-such-task"}}, {}),
        ({"method": "SendMessage", "params": {"message": message_v10("bad")}}, {}),
        ({"method": "message/send", "params": {"message": {"messageId": "bad-03"}}}, {}),
        ({"method": "NoSuchMethod"}, V10),
    ]
    for call, headers in calls:
        response = post(server, {"jsonrpc": "2.0", **call}, **headers)
        assert response.status_code == 204 and response.content == b"", call
    assert tasks_of(server, "bad") == [] and tasks_of(server, "bad-03") == []


def test_a_null_id_is_a_call_and_is_answered(server: AgentProcess) -> None:
    answer = post(server, {"jsonrpc": "2.0", "id": None, "method": "GetTask",
                           "params": {"id": "no-such-task"}}, **V10).json()  # fmt: skip
    assert answer["id"] is None and answer["error"]["code"] == -32001


REST_WITHOUT_VERSION = [
    ("GET", "/tasks/t-1", "whose path for this is GET /v1/tasks/t-1"),
    ("GET", "/acme/tasks/t-1", "whose path for this is GET /v1/tasks/t-1"),
    ("POST", "/message:send", "whose path for this is POST /v1/message:send"),
    ("POST", "/tasks/t-1:cancel", "whose path for this is POST /v1/tasks/t-1:cancel"),
    ("GET", "/tasks", "which has no such call"),
]


@pytest.mark.parametrize(("verb", "path", "then"), REST_WITHOUT_VERSION,
                         ids=[p for _, p, _ in REST_WITHOUT_VERSION])  # fmt: skip
def test_a_1_0_rest_path_without_the_header_says_to_send_it(
    server: AgentProcess, verb: str, path: str, then: str
) -> None:
    """It was told only "A2A version '0.3' is not supported ... Expected version '1.0'"."""
    body = {"message": message_v10("rest-unversioned")} if path == "/message:send" else None
    response = httpx.request(verb, f"{server.url}{path}", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    assert error["message"] == (
        f"{verb} {path} is A2A 1.0's HTTP+JSON binding: send the header A2A-Version: 1.0; a "
        f"request without it speaks A2A 0.3, {then}"
    )
    assert tasks_of(server, "rest-unversioned") == []


def test_a_0_3_rest_path_with_the_1_0_header_says_which_path(server: AgentProcess) -> None:
    response = httpx.get(f"{server.url}/v1/tasks/t-1", headers=V10, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "GET /v1/tasks/t-1 is a path of A2A 0.3's HTTP+JSON binding, and this request says "
        "A2A-Version 1.0: use GET /tasks/t-1, or send no A2A-Version header to speak 0.3"
    )


def test_rest_paths_with_their_own_version_and_our_routes_are_untouched(
    server: AgentProcess,
) -> None:
    assert httpx.get(f"{server.url}/tasks/t-1", headers=V10).status_code == 404
    assert httpx.get(f"{server.url}/v1/tasks/t-1").status_code == 404
    # The dashboard's /ui/tasks/... is not a tenant's /{tenant}/tasks/{id}.
    page = httpx.get(f"{server.url}/ui/tasks/t-1")
    assert "VERSION_NOT_SUPPORTED" not in page.text
