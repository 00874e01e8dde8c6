"""Refusals made at the door, before the SDK reads a request, in the protocol the request
speaks: a JSON-RPC error object on the JSON-RPC endpoint (A2A 1.0's form with its
`google.rpc.ErrorInfo` details, or 0.3's when the request has no `A2A-Version`), a plain
JSON-RPC error object on the MCP door (`MCP_PATH`, with JSON-RPC's own codes, as the `mcp`
SDK refuses), and an AIP-193 error object (`{"error": {code, status, message, details}}`)
everywhere else, with the codes and reasons the SDK uses for the same errors.

The HTTP status stays what the refusal is (401, 413, 415, 503): a client that looks only at
the status learns as much as one that reads the body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE
from a2a.utils.errors import (
    A2A_ERROR_MAPPING,
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    ErrorMapping,
)
from starlette.types import Scope, Send

from a2a_agent.edge.versions import V03, version_of_header

# The codes A2A 0.3 defines; a 0.3 client gets -32603 for the others (as the SDK's 0.3
# layer does).
V03_CODES = frozenset(
    {-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006}
)
PARSE_ERROR = ErrorMapping(400, "INVALID_ARGUMENT", "INVALID_REQUEST")
MCP_PATH = "/mcp"  # the MCP door (mcp_door/doorway.py)
# JSON-RPC's own codes: the MCP door's refusals keep these and say -32600 (an invalid request,
# as the `mcp` SDK says of a body it refuses) for A2A's, which mean other things in MCP.
JSONRPC_CODES = frozenset({-32700, -32600, -32601, -32602, -32603})


@dataclass(frozen=True)
class Refusal:
    """Why the door refused a request: an HTTP status, the JSON-RPC code, the AIP-193 status
    and reason, and a sentence a person can act on."""

    http_status: int
    rpc_code: int
    status: str
    reason: str
    message: str

    @classmethod
    def of(cls, error: A2AError, *, http_status: int | None = None) -> Refusal:
        """The refusal the SDK would make for `error`."""
        # A JSON parse error has no row in the table: the SDK's REST routes answer it as an
        # invalid request.
        mapping = A2A_ERROR_MAPPING.get(type(error), PARSE_ERROR)
        return cls(
            http_status=http_status or mapping.http_code,
            rpc_code=JSON_RPC_ERROR_CODE_MAP[type(error)],
            status=mapping.grpc_status,
            reason=mapping.reason,
            message=error.message,
        )


def unauthenticated(message: str) -> Refusal:
    return Refusal(401, -32600, "UNAUTHENTICATED", "UNAUTHENTICATED", message)


def unavailable(message: str) -> Refusal:
    return Refusal(503, -32603, "UNAVAILABLE", "UNAVAILABLE", message)


def too_large(message: str) -> Refusal:
    return Refusal(413, -32600, "INVALID_ARGUMENT", "PAYLOAD_TOO_LARGE", message)


def too_slow(message: str) -> Refusal:
    return Refusal(408, -32600, "DEADLINE_EXCEEDED", "REQUEST_TIMEOUT", message)


def header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return str(value.decode("latin-1"))
    return None


def speaks_jsonrpc(scope: Scope, jsonrpc_path: str) -> bool:
    return scope.get("method") == "POST" and scope.get("path") in (
        jsonrpc_path,
        jsonrpc_path.rstrip("/") + "/",
    )


def speaks_mcp(scope: Scope) -> bool:
    return scope.get("path") in (MCP_PATH, MCP_PATH + "/")


def mcp_error(refusal: Refusal) -> dict[str, Any]:
    """The JSON-RPC error an MCP client reads; the body is not read yet (or could not be),
    so the request's id is unknown."""
    code = refusal.rpc_code if refusal.rpc_code in JSONRPC_CODES else -32600
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": refusal.message}}


def error_body(
    scope: Scope, refusal: Refusal, *, jsonrpc_path: str, request_id: str | int | None = None
) -> dict[str, Any]:
    """The error object for `scope`'s protocol and binding (`request_id`: the JSON-RPC
    call's, when its body was read; before that it is unknown)."""
    if speaks_mcp(scope):
        return mcp_error(refusal)
    if speaks_jsonrpc(scope, jsonrpc_path):
        return rpc_error(refusal, header(scope, b"a2a-version"), request_id)
    info = {"@type": ERROR_INFO_TYPE, "reason": refusal.reason, "domain": A2A_DOMAIN}
    return {
        "error": {
            "code": refusal.http_status,
            "status": refusal.status,
            "message": refusal.message,
            "details": [{**info, "metadata": {}}],
        }
    }


def rpc_error(
    refusal: Refusal, version: str | None, request_id: str | int | None
) -> dict[str, Any]:
    """The JSON-RPC error object a client of the version its `A2A-Version` header names reads:
    1.0's with its `google.rpc.ErrorInfo` in `data`, 0.3's with a code 0.3 defines."""
    if version_of_header(version) == V03:
        code = refusal.rpc_code if refusal.rpc_code in V03_CODES else -32603
        error: dict[str, Any] = {"code": code, "message": refusal.message}
    else:
        info = {"@type": ERROR_INFO_TYPE, "reason": refusal.reason, "domain": A2A_DOMAIN}
        error = {"code": refusal.rpc_code, "message": refusal.message, "data": [info]}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


async def send_json(
    send: Send, status: int, payload: object, *, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """Answer a request with `payload` as JSON, before any app has read it."""
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def refuse(
    scope: Scope,
    send: Send,
    refusal: Refusal,
    *,
    jsonrpc_path: str,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    status: int | None = None,
    request_id: str | int | None = None,
) -> None:
    """Answer `scope` with `refusal` in its protocol (HTTP `status` if given, else the
    refusal's own; a JSON-RPC error with `request_id` when the body was read and held one)."""
    body = error_body(scope, refusal, jsonrpc_path=jsonrpc_path, request_id=request_id)
    await send_json(send, status or refusal.http_status, body, headers=headers)
