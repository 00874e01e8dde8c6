"""What the door answers for the SDK, on a real server: an A2A 0.3 call with bad params
(-32602 naming the field, not pydantic's dump and a logged traceback)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.support.processes import AgentProcess

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

pytestmark = pytest.mark.served


@pytest.fixture(scope="module")
def server(
    make_database: Callable[[str | None], str],
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AgentProcess]:
    process = AgentProcess(
        role="serve",
        database_url=make_database(template_db),
        home=tmp_path_factory.mktemp("home"),
        executor_id="door-calls",
    ).start()
    yield process
    process.kill()


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
