"""What the door reads of a JSON-RPC call before the SDK does, and answers itself: a method of
the other A2A version than the request's header, a call whose params the SDK would refuse
in its parser's words with a logged traceback (0.3: its pydantic models; 1.0: protobuf's
parser, which also takes an enum value it does not know as the field's zero), and a
notification.

A notification (a request object without an `id` member) gets no answer (JSON-RPC 2.0, 4.1:
"The Server MUST NOT reply to a Notification"); over HTTP that is 204 with an empty body. The
SDK answered it as a call with `"id": null` (and its 0.3 layer refused it: its models need an
id). A notification that changes something (a send, a cancel, a push config made or deleted)
is run once, as the call it names, and its answer dropped; a send runs as one that returns at
once (returnImmediately, 0.3's blocking=false), since no one waits for its answer: the task
and its run are made either way, and a streamed send would hold a stream no one reads. A read
changes nothing and is not run; nor is a notification the door or the SDK would refuse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping
from typing import Any

from a2a.utils.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    VersionNotSupportedError,
)

from a2a_agent.edge import params_v03, params_v10
from a2a_agent.edge.refusals import Refusal, rpc_error
from a2a_agent.edge.versions import (
    METHODS_V03_TO_V10,
    V03,
    method_version_mismatch,
    version_of_header,
)

Answer = dict[str, Any]


# Where the door leaves the body it parsed and what it found, in the request's scope, for the
# short paths after it (fast_reads.py, fast_sends.py): a body is parsed once, not once each.
PARSED_BODY = "a2a.parsed_body"


def parsed_call(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC request object in `body`, or None for anything else (a batch, text that
    is not JSON): the SDK says what is wrong with those."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    return call if isinstance(call, dict) and isinstance(call.get("method"), str) else None


def keep_parsed(scope: MutableMapping[str, Any], body: bytes, call: dict[str, Any]) -> None:
    """Leave `body` and the JSON-RPC call parsed from it for the short paths."""
    scope[PARSED_BODY] = (body, call)


def parsed_before(scope: Mapping[str, Any], body: bytes) -> dict[str, Any] | None:
    """The call the door parsed from this very `body`, or None when it parsed none (another
    body, or not a JSON-RPC call). Taken only by code that does not change what it is given."""
    kept = scope.get(PARSED_BODY)
    if kept is not None and kept[0] == body:
        call: dict[str, Any] = kept[1]
        return call
    return None


def answer_now(call: dict[str, Any], version: str | None) -> Answer | None:
    """The door's answer to `call`, with its id, when the SDK would answer it worse; None to
    hand it on."""
    method = call["method"]
    protocol = version_of_header(version)
    said = method_version_mismatch(method, protocol)
    if said is not None:
        # VersionNotSupported (-32009, 1.0's code), which either kind of client reads better
        # than 0.3's internal error: so not in 0.3's error form.
        return _error(call, VersionNotSupportedError(said), "1.0")
    if protocol == V03 and method in METHODS_V03_TO_V10:
        problem = params_v03.params_problem(method, call)
        if problem is not None:
            in_params, text = problem
            error = InvalidParamsError(text) if in_params else InvalidRequestError(text)
            return _error(call, error, version)
    elif protocol != V03 and (said_v10 := params_v10.params_problem(method, call)) is not None:
        return _error(call, InvalidParamsError(said_v10), version)
    return None


NOTIFICATION_ID = "notification"  # the id a notification runs under; its answer is dropped
SENDS = {
    "SendMessage": ("SendMessage", "returnImmediately", True),
    "SendStreamingMessage": ("SendMessage", "returnImmediately", True),
    "message/send": ("message/send", "blocking", False),
    "message/stream": ("message/send", "blocking", False),
}
CHANGES = frozenset(
    {
        "CancelTask",
        "CreateTaskPushNotificationConfig",
        "DeleteTaskPushNotificationConfig",
        "tasks/cancel",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/delete",
    }
)


def is_notification(call: dict[str, Any]) -> bool:
    # `"id": null` is a call (discouraged, but answered); an invalid request object is
    # answered with its error whether it has an id or not (JSON-RPC 2.0, section 5).
    return "id" not in call and call.get("jsonrpc") == "2.0"


def notification_run(call: dict[str, Any], version: str | None) -> bytes | None:
    """The body of the call a notification runs as, or None when nothing is to run."""
    method = call["method"]
    if method not in SENDS and method not in CHANGES:
        return None
    named = {**call, "id": NOTIFICATION_ID}
    if answer_now(named, version) is not None:
        return None  # refused, and not told so: no answer is the rule
    params = named.get("params")
    if method in SENDS and isinstance(params, dict):
        runs_as, key, value = SENDS[method]
        configuration = params.get("configuration") or {}
        if isinstance(configuration, dict):
            configuration = {**configuration, key: value}
        named = {**named, "method": runs_as, "params": {**params, "configuration": configuration}}
    return json.dumps(named).encode()


def call_id(call: dict[str, Any] | None) -> str | int | None:
    """The call's id, to echo when JSON-RPC allows it as one (a string or a whole number,
    not a boolean); else None."""
    given = None if call is None else call.get("id")
    return given if isinstance(given, str | int) and not isinstance(given, bool) else None


def _error(call: dict[str, Any], error: A2AError, version: str | None) -> Answer:
    return rpc_error(Refusal.of(error), version, call_id(call))
