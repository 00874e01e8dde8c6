"""Streams that resume: every stream event carries its event id (`<task id>:<seq>`) in its
metadata and as the SSE `id:`; a client that reconnects to SubscribeToTask with the last id it
saw (the `Last-Event-ID` header, or `?lastEventId=` on the URL for clients that cannot set
headers) gets exactly the events after it, read from the event log, on any replica.

The SDK writes the SSE frames; this ASGI middleware adds the `id:` lines to them (from the
event's metadata) and turns the query parameter into the header.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LAST_EVENT_ID = b"last-event-id"
QUERY_PARAMETER = "lastEventId"


def _event_id(data: bytes) -> str | None:
    try:
        item = json.loads(data)
    except ValueError:
        return None
    result = item.get("result") if isinstance(item, dict) else None
    if not isinstance(result, dict):
        return None
    for kind in ("statusUpdate", "artifactUpdate", "task"):
        event = result.get(kind)
        if isinstance(event, dict):
            found = (event.get("metadata") or {}).get("eventId")
            return str(found) if found else None
    return None


def _with_id(frame: bytes) -> bytes:
    lines = frame.splitlines(keepends=True)
    for line in lines:
        if line.startswith(b"data:"):
            found = _event_id(line[5:].strip())
            if found is not None and not any(x.startswith(b"id:") for x in lines):
                return b"id: " + found.encode() + b"\r\n" + frame
    return frame


def _split(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Complete SSE frames (with their blank-line end) and what remains."""
    frames: list[bytes] = []
    while True:
        ends = [i for i in (buffer.find(b"\r\n\r\n"), buffer.find(b"\n\n")) if i >= 0]
        if not ends:
            return frames, buffer
        end = min(ends)
        size = 4 if buffer.startswith(b"\r\n\r\n", end) else 2
        frames.append(buffer[: end + size])
        buffer = buffer[end + size :]


class ResumableStreams:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        headers = list(scope.get("headers", []))
        if QUERY_PARAMETER in query and not any(k == LAST_EVENT_ID for k, _ in headers):
            headers.append((LAST_EVENT_ID, query[QUERY_PARAMETER][0].encode()))
            scope = {**scope, "headers": headers}
        state: dict[str, Any] = {"streaming": False, "buffer": b""}

        async def send_with_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                state["streaming"] = content_type.startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and state["streaming"]:
                frames, state["buffer"] = _split(state["buffer"] + message.get("body", b""))
                body = b"".join(_with_id(f) for f in frames)
                if not message.get("more_body", False):
                    body, state["buffer"] = body + state["buffer"], b""
                message = {**message, "body": body}
            await send(message)

        await self.app(scope, receive, send_with_ids)
