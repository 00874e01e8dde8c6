"""The door's check of an A2A 1.0 call's params against the protobuf messages the SDK parses
them into (`edge/params_v10.py`): a wrong type or an enum value protobuf does not know is
named in a sentence; what protobuf's JSON parser takes passes."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import SendMessageRequest
from google.protobuf.json_format import ParseDict

from a2a_agent.edge.params_v10 import params_problem


def message(**fields: Any) -> dict[str, Any]:
    return {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], **fields}}


BAD: list[tuple[str, str, Any, str]] = [
    ("a numeric id", "GetTask", {"id": 5}, "params.id must be a string (got 5)"),
    ("an unknown role", "SendMessage", message(role="ROBOT"),
     'params.message.role must be ROLE_USER or ROLE_AGENT (got "ROBOT")'),
    ("a 0.3 role", "SendMessage", message(role="user"),
     'params.message.role must be ROLE_USER or ROLE_AGENT (got "user")'),
    ("parts not a list", "SendStreamingMessage", message(parts="x"),
     'params.message.parts must be a list (got "x")'),
    ("a part not an object", "SendMessage", message(parts=["x"]),
     'params.message.parts[0] must be an object (got "x")'),
    ("metadata not an object", "SendMessage", message(metadata=3),
     "params.message.metadata must be an object (got 3)"),
    ("a page size in words", "ListTasks", {"pageSize": "ten"},
     'params.pageSize must be a whole number (got "ten")'),
    ("a fractional page size", "ListTasks", {"pageSize": 2.5},
     "params.pageSize must be a whole number (got 2.5)"),
    ("a state protobuf lacks", "ListTasks", {"status": "completed"},
     'params.status must be TASK_STATE_SUBMITTED, TASK_STATE_WORKING'),
    ("a flag in words", "SendMessage", {**message(), "configuration": {"returnImmediately": "y"}},
     'params.configuration.returnImmediately must be true or false (got "y")'),
    ("params a list", "CancelTask", [1], "params must be an object (got a list)"),
]  # fmt: skip


@pytest.mark.parametrize(("case", "method", "params", "said"), BAD, ids=[c[0] for c in BAD])
def test_a_bad_value_is_named_with_what_its_field_takes(
    case: str, method: str, params: Any, said: str
) -> None:
    problem = params_problem(
        method, {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    )
    assert problem is not None and problem.startswith(f"invalid {method!r} call: {said}"), problem


def test_several_problems_are_named_at_most_four_at_a_time() -> None:
    params = {
        "message": {"messageId": 7, "role": "X", "parts": "p", "extensions": "e", "taskId": 1},
    }
    problem = params_problem("SendMessage", {"method": "SendMessage", "params": params})
    assert problem is not None and problem.count("must be") == 4 and problem.endswith("1 more")


GOOD: list[tuple[str, str, Any]] = [
    ("a plain send", "SendMessage", message()),
    ("data, metadata and files", "SendMessage", message(
        parts=[{"data": {"plan": {"items": [1, 2.5, None]}}, "metadata": {"a": [1]}},
               {"raw": "aGk=", "mediaType": "text/plain", "filename": "f"},
               {"url": "https://example.com/f"}],
        metadata={"k": 2}, extensions=["x"], referenceTaskIds=["t"])),
    ("whole numbers as protobuf takes them", "ListTasks",
     {"pageSize": "10", "historyLength": 2.0, "status": "TASK_STATE_WORKING"}),
    ("an enum by number", "SendMessage", message(role=1)),
    ("nulls and unknown fields", "GetTask", {"id": "t", "historyLength": None, "bogus": 1}),
    ("snake_case names", "SendMessage", {"message": {"message_id": "m", "role": "ROLE_USER",
                                                     "parts": [{"text": "hi"}]}}),
    ("no params", "GetExtendedAgentCard", None),
    ("a push config", "CreateTaskPushNotificationConfig",
     {"taskId": "t", "url": "https://example.com/h", "authentication": {"scheme": "Bearer"}}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "method", "params"), GOOD, ids=[c[0] for c in GOOD])
def test_what_protobuf_takes_passes(case: str, method: str, params: Any) -> None:
    assert params_problem(method, {"method": method, "params": params}) is None
    # The check agrees with the parser the SDK runs next (which would raise otherwise).
    ParseDict(params or {}, JsonRpcDispatcher.METHOD_TO_MODEL[method](), ignore_unknown_fields=True)


def test_every_bad_case_is_one_protobuf_refuses_or_would_drop() -> None:
    """Each refused value is one protobuf's parser raises on, or silently loses (an enum
    value it does not know becomes the field's zero; a part that is not an object, an empty
    part): never one the SDK would have used as given."""
    for _case, method, params, _said in BAD:
        if not isinstance(params, dict):
            continue
        try:
            parsed = ParseDict(params, JsonRpcDispatcher.METHOD_TO_MODEL[method](),
                               ignore_unknown_fields=True)  # fmt: skip
        except Exception:  # noqa: BLE001  (refused by protobuf too: as expected)
            continue
        if isinstance(parsed, SendMessageRequest):
            lost_part = parsed.message.parts[0].WhichOneof("content") is None
            assert parsed.message.role == 0 or lost_part
        else:
            assert parsed.status == 0  # the unknown state
