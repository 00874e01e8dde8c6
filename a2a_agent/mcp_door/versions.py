"""The MCP versions the door speaks, checked before the `mcp` SDK reads a request.

The SDK sends a request whose `MCP-Protocol-Version` it does not know to its 2026-07-28 entry,
whose first check is that version's per-request envelope: a client that sent a version this
server does not speak was told `params._meta must be an object carrying ...`, which says
nothing of versions. `KnownVersions` answers such a request itself, as the SDK answers a
2026-07-28 envelope naming a version it does not speak (UNSUPPORTED_PROTOCOL_VERSION, HTTP
400, the versions in `data`), and says in words which version came and which are spoken.
"""

from __future__ import annotations

import json

from mcp_types import UNSUPPORTED_PROTOCOL_VERSION, UnsupportedProtocolVersionErrorData
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.refusals import header, send_json
from a2a_agent.edge.rpc_calls import call_id

HEADER = b"mcp-protocol-version"
SPOKEN = (*MODERN_PROTOCOL_VERSIONS, *reversed(HANDSHAKE_PROTOCOL_VERSIONS))  # newest first


def unsupported(sent: str) -> str:
    return (
        f"MCP-Protocol-Version {sent!r} is not a version this server speaks: it speaks "
        f"{', '.join(MODERN_PROTOCOL_VERSIONS)} (named in each request's _meta) and "
        f"{', '.join(reversed(HANDSHAKE_PROTOCOL_VERSIONS))} (agreed by initialize)"
    )


class KnownVersions:
    """The door's ASGI app behind a check of the request's MCP version (the module's
    docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sent = header(scope, HEADER) if scope["type"] == "http" else None
        if sent is None or sent in SPOKEN:
            await self.app(scope, receive, send)
            return
        data = UnsupportedProtocolVersionErrorData(supported=list(SPOKEN), requested=sent)
        error = {
            "code": UNSUPPORTED_PROTOCOL_VERSION,
            "message": unsupported(sent),
            "data": data.model_dump(mode="json"),
        }
        answer = {"jsonrpc": "2.0", "id": _request_id(await _body(receive)), "error": error}
        await send_json(send, 400, answer)


async def _body(receive: Receive) -> bytes:
    """The request's body (the door's RequestLimits has read it once, and bounded it)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    return b"".join(chunks)


def _request_id(body: bytes) -> str | int | None:
    """The JSON-RPC id of the request in `body`; None if it has none the answer can carry."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    return call_id(call if isinstance(call, dict) else None)
