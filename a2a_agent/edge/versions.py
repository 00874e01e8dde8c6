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
