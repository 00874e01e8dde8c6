"""Which A2A version a request speaks.

A2A 1.0: a request without an `A2A-Version` header is a 0.3 request. The SDK's 0.3 layer
converts 0.3 requests into 1.0 calls of our handler, so the handler reads the version from
the call's headers when what it does differs by version (the push payload's shape, the
error's form).
"""

from __future__ import annotations

from typing import Literal

from a2a.server.context import ServerCallContext

Protocol = Literal["0.3", "1.0"]
V03: Protocol = "0.3"
V10: Protocol = "1.0"


def version_of_header(value: str | None) -> Protocol:
    """The protocol an `A2A-Version` header value names (absent or empty: 0.3)."""
    text = (value or "").strip()
    # A header that names no 0.x version comes from a client of 1.0 or later: its errors
    # take 1.0's form (the version itself is checked at the door).
    return V03 if not text or text.split(".", 1)[0] == "0" else V10


def protocol_of(context: ServerCallContext | None) -> Protocol:
    """The protocol of the request behind `context` (a call made in-process, with no
    request, is ours: 1.0)."""
    if context is None:
        return V10
    headers = context.state.get("headers")
    if not isinstance(headers, dict):
        return V10
    return version_of_header(headers.get("a2a-version") or headers.get("A2A-Version"))


# Each JSON-RPC method of A2A 0.3 and its name at 1.0: a request that names one version's
# method while its header names the other is told which to change, not "not supported".
METHODS_V03_TO_V10 = {
    "message/send": "SendMessage",
    "message/stream": "SendStreamingMessage",
    "tasks/get": "GetTask",
    "tasks/cancel": "CancelTask",
    "tasks/resubscribe": "SubscribeToTask",
    "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
    "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
    "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
    "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard",
}
METHODS_V10 = frozenset({*METHODS_V03_TO_V10.values(), "ListTasks"})


def method_version_mismatch(method: str, version: Protocol) -> str | None:
    """What to change when `method` belongs to the other version than the request's header
    says (None when they agree, or the method is neither's: the SDK says that)."""
    if version == V10 and method in METHODS_V03_TO_V10:
        return (
            f"{method!r} is an A2A 0.3 method, and this request says A2A-Version 1.0: call "
            f"{METHODS_V03_TO_V10[method]!r}, or send A2A-Version: 0.3 (or no version "
            "header) to speak 0.3"
        )
    if version == V03 and method in METHODS_V10:
        at_03 = [old for old, new in METHODS_V03_TO_V10.items() if new == method]
        then = f" (at 0.3 it is {at_03[0]!r})" if at_03 else ""
        return (
            f"{method!r} is an A2A 1.0 method: send the header A2A-Version: 1.0; a request "
            f"without it speaks A2A 0.3{then}"
        )
    return None
