"""What a request no route takes is told, in the form of the binding it was aimed at.

Starlette answers a path it has no route for with a plain-text "Not Found" (and a method a
route does not take with "Method Not Allowed"): an A2A or MCP client that reads the AIP-193
error object, or a JSON-RPC error, gets text it cannot parse. Here such a request gets the
door's error object (`refusals.error_body`) with a sentence naming where the endpoints are;
the dashboard's pages keep the plain text a browser shows.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from a2a_agent.edge.auth import on_dashboard
from a2a_agent.edge.refusals import Refusal, error_body

METHOD_NOT_FOUND = -32601  # JSON-RPC's own: nothing answers that call here
ENDPOINTS = (
    "A2A JSON-RPC is POST /, A2A HTTP+JSON's paths are in the agent card "
    "(/.well-known/agent-card.json), MCP is POST /mcp and the dashboard is /ui"
)


def not_routed_handler(jsonrpc_path: str) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The exception handler for 404 and 405 (Starlette raises both as HTTPException)."""

    async def not_routed(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if on_dashboard(request.url.path):
            return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=headers)
        what = f"{request.method} {request.url.path}"
        if exc.status_code == 405:
            allowed = next((v for k, v in headers.items() if k.lower() == "allow"), "")
            text = f"{what}: that path does not take {request.method}; it takes {allowed}"
            refusal = Refusal(405, METHOD_NOT_FOUND, "UNIMPLEMENTED", "METHOD_NOT_ALLOWED", text)
        else:
            text = f"{what} is no endpoint of this server: {ENDPOINTS}"
            refusal = Refusal(404, METHOD_NOT_FOUND, "NOT_FOUND", "NOT_FOUND", text)
        body = error_body(request.scope, refusal, jsonrpc_path=jsonrpc_path)
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    return not_routed
