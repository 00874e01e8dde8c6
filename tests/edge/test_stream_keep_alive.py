"""Keep-alive comments on quiet streams (`A2A_AGENT_STREAM_PING_S`), at the ASGI tier: the
middleware around an app that streams with gaps, every message it sends recorded with when."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_agent.edge.streams import KEEP_ALIVE, ResumableStreams

FRAME = (
    b'data: {"jsonrpc": "2.0", "id": 1, '
    b'"result": {"statusUpdate": {"metadata": {"eventId": "t:%d"}}}}\r\n\r\n'
)


def streaming(
    parts: Sequence[tuple[float, bytes]], content_type: bytes = b"text/event-stream"
) -> ASGIApp:
    """An app that sends each body part after its pause, then ends the response."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type)],
            }
        )
        for pause, body in parts:
            await asyncio.sleep(pause)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def sent_by(app: ASGIApp, ping_s: float) -> list[tuple[float, bytes]]:
    sent: list[tuple[float, bytes]] = []
    started = time.monotonic()

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            sent.append((time.monotonic() - started, message.get("body", b"")))

    async def receive() -> Message:
        await asyncio.sleep(3600)
        return {"type": "http.disconnect"}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [], "query_string": b""}
    await ResumableStreams(app, ping_s=ping_s)(scope, receive, send)
    await asyncio.sleep(0.3)  # a ping that outlived the response would show here
    return sent


async def test_a_quiet_stream_gets_a_comment_each_interval_and_none_after_it_ends() -> None:
    sent = await sent_by(streaming([(0, FRAME % 1), (0.45, FRAME % 2)]), ping_s=0.1)
    bodies = [b for _, b in sent]
    assert bodies[0] == b"id: t:1\r\n" + FRAME % 1
    pings = [at for at, b in sent if b == KEEP_ALIVE]
    assert 3 <= len(pings) <= 5, sent
    assert all(later - earlier >= 0.09 for earlier, later in itertools.pairwise(pings))
    assert bodies[-2:] == [b"id: t:2\r\n" + FRAME % 2, b""]  # the end, and nothing after it
    assert b"".join(bodies).count(b"id: ") == 2


async def test_a_frame_written_in_two_parts_is_never_split_by_a_comment() -> None:
    half = len(FRAME) // 2
    frame = FRAME % 1
    sent = await sent_by(streaming([(0, frame[:half]), (0.35, frame[half:])]), ping_s=0.1)
    bodies = [b for _, b in sent if b]
    assert KEEP_ALIVE not in bodies, bodies  # quiet, but in the middle of a frame
    assert b"".join(bodies) == b"id: t:1\r\n" + frame


async def test_other_responses_and_a_zero_interval_get_no_comment() -> None:
    json_reply = await sent_by(streaming([(0.3, b"{}")], b"application/json"), ping_s=0.1)
    assert [b for _, b in json_reply] == [b"{}", b""]
    off = await sent_by(streaming([(0.3, FRAME % 1)]), ping_s=0)
    assert KEEP_ALIVE not in [b for _, b in off]


def events_as_httpx_sse_reads(stream: bytes) -> list[tuple[str, str]]:
    """(id, data) of each event, dispatched as httpx-sse 0.4 (the a2a-sdk 0.3 client's
    parser) does: at every blank line once an event type, data or an id was seen, the id kept
    from one event to the next (the spec dispatches nothing without data; it does)."""
    events: list[tuple[str, str]] = []
    data: list[str] = []
    last_id = ""
    for line in stream.decode().splitlines():
        if not line:
            if data or last_id:
                events.append((last_id, "\n".join(data)))
            data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())
        elif line.startswith("id:"):
            last_id = line[3:].strip()
    return events


async def test_a_ping_after_an_event_is_no_event_to_a_0_3_client() -> None:
    """A 0.3 REST client's resubscribe parsed every dispatched event's data as JSON and failed
    on the empty one a ping made after the first event (seen on a slow machine)."""
    library_ping = b": ping - 2026-12-03 22:00:00.000000+00:00\r\n\r\n"  # sse-starlette's
    parts = [(0, FRAME % 1), (0.05, library_ping), (0.3, FRAME % 2)]
    sent = await sent_by(streaming(parts), ping_s=0.1)
    stream = b"".join(b for _, b in sent)
    assert KEEP_ALIVE in stream and b": ping - " in stream  # both pings went out
    events = events_as_httpx_sse_reads(stream)
    assert [event_id for event_id, _ in events] == ["t:1", "t:2"], events
    assert all(data for _, data in events)
