"""Streams that resume, on both bindings and both protocol versions: every stream event
carries its event id (`<task id>:<seq>`) in its metadata and as the SSE `id:`; a client that
reconnects to SubscribeToTask with the last id it saw (the `Last-Event-ID` header, or
`?lastEventId=` on the URL for clients that cannot set headers) gets exactly the events
after it, read from the event log, on any replica.

The SDK writes the SSE frames; this ASGI middleware adds the `id:` lines to them (from the
event's metadata), turns the query parameter into the header, and keeps a quiet stream alive:
a comment line (`: keep-alive`) after `ping_s` seconds without a frame
(`A2A_AGENT_STREAM_PING_S`), so a client's read timeout, or a proxy's idle timeout, longer
than that never fires while a long step runs. sse-starlette's own 15 s ping stays beneath it,
sent, as ours, as comment lines with no blank line after them (see KEEP_ALIVE).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LAST_EVENT_ID = b"last-event-id"
QUERY_PARAMETER = "lastEventId"
# A comment line without the blank line that would end an event: httpx-sse (the a2a-sdk 0.3
# client's parser) dispatches an event at every blank line once an `id:` was seen, so a
# comment ended by one reached that client as an event with empty data, which it failed to
# parse as JSON. A bare comment line is still bytes on a quiet connection.
KEEP_ALIVE = b": keep-alive\r\n"


def _event_id(data: bytes) -> str | None:
    """The event id a frame's event carries in its metadata, whichever binding and version
    wrote it: a JSON-RPC envelope or REST's bare `StreamResponse`; 1.0's `{statusUpdate: ..}`
    or 0.3's `{kind: "status-update", ..}`."""
    try:
        item = json.loads(data)
    except ValueError:
        return None
    if isinstance(item, dict) and "jsonrpc" in item:
        item = item.get("result")
    if not isinstance(item, dict):
        return None
    event: Any = item if "kind" in item else None
    for kind in ("statusUpdate", "artifactUpdate", "task"):
        if event is None and isinstance(item.get(kind), dict):
            event = item[kind]
    if not isinstance(event, dict):
        return None
    found = (event.get("metadata") or {}).get("eventId")
    return str(found) if found else None


def _as_sent(frame: bytes) -> bytes:
    """A frame as it goes out: its event id added as `id:`; a frame of comments only (the SSE
    library's own ping) without its blank-line end (see KEEP_ALIVE)."""
    lines = frame.splitlines(keepends=True)
    if all(line.startswith(b":") or not line.strip() for line in lines):
        return b"".join(line for line in lines if line.strip())
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
    def __init__(self, app: ASGIApp, *, ping_s: float = 15.0) -> None:
        self.app = app
        self.ping_s = ping_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode())
        headers = list(scope.get("headers", []))
        if QUERY_PARAMETER in query and not any(k == LAST_EVENT_ID for k, _ in headers):
            headers.append((LAST_EVENT_ID, query[QUERY_PARAMETER][0].encode()))
            scope = {**scope, "headers": headers}
        stream = _Stream(send, self.ping_s)
        try:
            await self.app(scope, receive, stream.send)
        finally:
            await stream.close()


class _Stream:
    """One response as it goes out: frames given their ids, and, while it is an open event
    stream, a comment sent whenever it has been quiet for the ping interval. Sends never
    overlap (an ASGI `send` is not re-entrant) and a comment never splits a frame."""

    def __init__(self, send: Send, ping_s: float) -> None:
        self._send = send
        self._ping_s = ping_s
        self._lock = asyncio.Lock()
        self._buffer = b""
        self._streaming = False
        self._ended = False
        self._last = time.monotonic()
        self._pinger: asyncio.Task[None] | None = None

    async def send(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                self._streaming = content_type.startswith(b"text/event-stream")
                if self._streaming and self._ping_s > 0:
                    # Ended with the response (`close`); a send that fails ends it too.
                    self._pinger = asyncio.create_task(self._pings(), name="stream keep-alive")
            elif message["type"] == "http.response.body" and self._streaming:
                frames, self._buffer = _split(self._buffer + message.get("body", b""))
                body = b"".join(_as_sent(f) for f in frames)
                if not message.get("more_body", False):
                    body, self._buffer = body + self._buffer, b""
                    self._ended = True
                message = {**message, "body": body}
            await self._send(message)
            self._last = time.monotonic()

    async def _pings(self) -> None:
        ping_s = self._ping_s
        while True:
            # Due a ping interval after the last frame; never sooner than a tenth of one (a
            # frame still half-written waits for its end).
            await asyncio.sleep(max(ping_s / 10, self._last + ping_s - time.monotonic()))
            async with self._lock:
                if self._ended:
                    return
                quiet = time.monotonic() - self._last >= ping_s
                if quiet and not self._buffer:
                    try:
                        await self._send(
                            {"type": "http.response.body", "body": KEEP_ALIVE, "more_body": True}
                        )
                    except OSError:  # the client went away: the response ends on its own
                        return
                    self._last = time.monotonic()

    async def close(self) -> None:
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
