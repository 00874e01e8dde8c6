"""Checks on a request before the SDK reads it: its body's type, size and nesting, and its
A2A-Version header."""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

JSON_TYPES = (b"application/json", b"application/a2a+json")
WITH_BODY = ("POST", "PUT", "PATCH")
JSON_PARSE_ERROR = -32700
VERSION_NOT_SUPPORTED = -32009


class StrictContentType:
    """A request with a body must say it is JSON (`Content-Type: application/json`); a form
    or `text/plain` POST is what a browser page sends to a server it should not reach."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in WITH_BODY:
            declared = b""
            for name, value in scope["headers"]:
                if name == b"content-type":
                    declared = value.split(b";", 1)[0].strip().lower()
                    break
            if declared not in JSON_TYPES:
                got = declared.decode("latin-1") or "none"
                await send_json(
                    send,
                    415,
                    {
                        "error": "send the request body as JSON with 'Content-Type: "
                        f"application/json' (got {got!r})"
                    },
                )
                return
        await self.app(scope, receive, send)


VERSION = re.compile(rb"\d{1,3}(\.\d{1,3}){0,2}")
MAX_DEPTH = 64  # nesting of JSON objects and arrays in a request


def json_depth(body: bytes) -> int:
    """The deepest nesting of objects and arrays in `body` (strings skipped)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):
            depth += 1
            deepest = max(deepest, depth)
        elif byte in (0x7D, 0x5D):
            depth -= 1
    return deepest


def _unreadable(body: bytes) -> str | None:
    """Why `body` cannot be JSON the SDK may parse, or None."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the request body is not valid UTF-8 (byte {exc.start}); JSON is UTF-8"
    # Cheap first: fewer brackets than the limit cannot nest deeper than it.
    if body.count(b"{") + body.count(b"[") > MAX_DEPTH and json_depth(body) > MAX_DEPTH:
        return f"the request's JSON nests deeper than {MAX_DEPTH} levels"
    return None


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


async def _refuse(send: Send, *, rpc: bool, code: int, text: str) -> None:
    """A JSON-RPC error (HTTP 200, as JSON-RPC answers) or, for REST, a 400 saying why."""
    if rpc:
        error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": text}}
        await send_json(send, 200, error)
    else:
        await send_json(send, 400, {"error": text})


class RequestLimits:
    """What no request may exceed, checked before the SDK parses it: the body's size (413),
    its encoding (UTF-8) and the nesting of its JSON (the JSON-RPC parse error, not a codec's
    or Python's recursion limit's text), and an `A2A-Version` that is not a version number
    (VersionNotSupported, not an int overflow)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int, jsonrpc_path: str = "/") -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.jsonrpc_path = jsonrpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rpc = scope["path"] == self.jsonrpc_path
        for name, value in scope["headers"]:
            if name == b"a2a-version" and not VERSION.fullmatch(value.strip()):
                text = "A2A-Version must be a version number such as 1.0; this server speaks 1.0"
                await _refuse(send, rpc=rpc, code=VERSION_NOT_SUPPORTED, text=text)
                return
        if scope["method"] not in WITH_BODY:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            event: Message = await receive()
            if event["type"] == "http.disconnect":
                return
            chunk: bytes = event.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                too_big = f"the request is larger than {self.max_bytes} bytes"
                await send_json(send, 413, {"error": too_big})
                return
            chunks.append(chunk)
            if not event.get("more_body"):
                break
        body = b"".join(chunks)
        unreadable = _unreadable(body)
        if unreadable is not None:
            await _refuse(send, rpc=rpc, code=JSON_PARSE_ERROR, text=unreadable)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)
