"""The MCP door, opened by its first request.

The `mcp` SDK costs a process about 0.45 s of CPU to import, a quarter of a server's start,
and most processes never get an MCP request (the API processes of a deployment whose callers
speak A2A, the test suite's hundreds of servers). So `/mcp` is served by this doorway, which
builds the door (importing the SDK in a thread, so the event loop keeps serving) and starts
its session manager when the first request comes, and closes it with the app. The first MCP
request of a process waits for that; every later one goes straight through.

The door is stateless streamable HTTP that answers each POST in full (JSON, or the stream a
`subscriptions/listen` asks for): it keeps no sessions and sends nothing unasked. So a GET
(the SDK would hold an SSE stream open on which nothing ever comes), a DELETE (there is no
session to end) or any other method is answered here at once: 405 with `Allow: POST`, in
JSON-RPC, as the door's other refusals.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Protocol

from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.refusals import MCP_PATH, Refusal, mcp_error, send_json, unavailable

PATH = MCP_PATH


class Door(Protocol):
    """What the doorway needs of the door it opens (`server.McpDoor`)."""

    @property
    def asgi(self) -> ASGIApp: ...
    def lifespan(self) -> AbstractAsyncContextManager[None]: ...


class Doorway:
    """An ASGI app at `PATH` that opens the door `build` makes on the first request."""

    def __init__(self, build: Callable[[], Door]) -> None:
        self._build = build
        self._door: Door | None = None
        self._lock = asyncio.Lock()
        self._stack = AsyncExitStack()
        self._closed = False

    def routes(self) -> list[BaseRoute]:
        return [Route(PATH, endpoint=self)]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] != "POST":
            await _not_allowed(scope["method"], send)
            return
        door = self._door or await self._open()
        if door is None:
            refusal = unavailable("the server is shutting down; try again shortly")
            await send_json(send, refusal.http_status, mcp_error(refusal))
            return
        await door.asgi(scope, receive, send)

    async def _open(self) -> Door | None:
        async with self._lock:
            if self._door is None and not self._closed:
                door = await asyncio.to_thread(self._build)
                await self._stack.enter_async_context(door.lifespan())
                self._door = door
            return self._door

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The app's lifespan: nothing to start; at the end, the door closed if it opened."""
        try:
            yield
        finally:
            async with self._lock:  # a door being opened is opened first, then closed
                self._closed = True
                self._door = None
                await self._stack.aclose()


NOT_ALLOWED = {
    "GET": "this MCP endpoint opens no SSE stream on GET: it keeps no sessions and answers "
    "each request in full; send JSON-RPC requests by POST",
    "DELETE": "this MCP endpoint keeps no sessions, so there is none to end; send JSON-RPC "
    "requests by POST",
}


async def _not_allowed(method: str, send: Send) -> None:
    said = NOT_ALLOWED.get(
        method, f"{method} is not a method of this MCP endpoint; send JSON-RPC requests by POST"
    )
    refusal = Refusal(405, -32600, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED", said)
    await send_json(send, 405, mcp_error(refusal), headers=((b"allow", b"POST"),))
