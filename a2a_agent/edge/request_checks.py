"""Checks on a request before the SDK reads it: its body's type, size and nesting, and its
A2A-Version header."""

from __future__ import annotations

import asyncio
import re

from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    InvalidParamsError,
    JSONParseError,
    VersionNotSupportedError,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_agent.edge.json_checks import nonfinite
from a2a_agent.edge.json_text import lone_surrogate, lone_surrogate_message
from a2a_agent.edge.refusals import (
    Refusal,
    header,
    refuse,
    send_json,
    speaks_jsonrpc,
    speaks_mcp,
    too_large,
    too_slow,
)
from a2a_agent.edge.rpc_calls import (
    answer_now,
    call_id,
    is_notification,
    keep_parsed,
    notification_run,
    parsed_call,
)

JSON_TYPES = (b"application/json", b"application/a2a+json")
MCP_JSON_TYPES = (b"application/json",)  # the `mcp` SDK refuses A2A's type, in plain text
WITH_BODY = ("POST", "PUT", "PATCH")
THREADED_DEPTH_BYTES = 256 * 1024


class TrustedHosts:
    """Only requests for this server's own names (`Host`), so a page that re-points a name it
    controls at this address (DNS rebinding) reaches nothing. As starlette's
    TrustedHostMiddleware, with the refusal in the request's protocol."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: list[str], jsonrpc_path: str = "/"):
        self.app = app
        self.allowed = [pattern.lower() for pattern in allowed_hosts]
        self.jsonrpc_path = jsonrpc_path

    def _allows(self, host: str) -> bool:
        name = host.strip().lower()
        if name.startswith("["):
            name = name[: name.find("]") + 1]
        elif name.count(":") == 1:
            name = name.split(":", 1)[0]
        return bool(name) and any(
            pattern in ("*", name) or (pattern.startswith("*") and name.endswith(pattern[1:]))
            for pattern in self.allowed
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and not self._allows(
            header(scope, b"host") or ""
        ):
            text = "this server does not answer for that Host; use its own address"
            refusal = Refusal(400, -32600, "INVALID_ARGUMENT", "INVALID_HOST", text)
            await refuse(scope, send, refusal, jsonrpc_path=self.jsonrpc_path)
            return
        await self.app(scope, receive, send)


class StrictContentType:
    """A request with a body must say it is JSON (`Content-Type: application/json`); a form
    or `text/plain` POST is what a browser page sends to a server it should not reach. A POST
    with no body and no type is what the bindings send where a method has no body (the
    SDK's REST `:subscribe` and `:cancel`): it is let through as empty."""

    def __init__(self, app: ASGIApp, *, jsonrpc_path: str = "/") -> None:
        self.app = app
        self.jsonrpc_path = jsonrpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in WITH_BODY:
            declared = (header(scope, b"content-type") or "").split(";", 1)[0].strip().lower()
            types = MCP_JSON_TYPES if speaks_mcp(scope) else JSON_TYPES
            if declared.encode() not in types and not (not declared and _bodyless(scope)):
                got = declared or "none"
                text = (
                    "send the request body as JSON with 'Content-Type: application/json' "
                    f"(got {got!r})"
                )
                refusal = Refusal.of(ContentTypeNotSupportedError(text), http_status=415)
                await refuse(scope, send, refusal, jsonrpc_path=self.jsonrpc_path)
                return
        await self.app(scope, receive, send)


def _bodyless(scope: Scope) -> bool:
    """Whether the request says it has no body (`Content-Length: 0`, or neither a length nor
    a chunked transfer)."""
    length = header(scope, b"content-length")
    if length is not None:
        return length.strip() == "0"
    return header(scope, b"transfer-encoding") is None


VERSION = re.compile(rb"\d{1,3}(\.\d{1,3}){0,2}")
SPOKEN = "this server speaks 1.0 (send A2A-Version: 1.0) and 0.3 (send no A2A-Version header)"


def _version_refused(version: str) -> str | None:
    """Why an `A2A-Version` header names nothing this server speaks, or None. (For 2.0 the
    SDK said only "Expected version '1.0'", as if 0.3 were not served.) Within 1.x and 0.x
    the SDK and the 0.3 layer judge the minor version."""
    text = version.strip()
    if not VERSION.fullmatch(text.encode()):
        return f"A2A-Version must be a version number such as 1.0 (got {text[:40]!r}); {SPOKEN}"
    if int(text.split(".", 1)[0]) > 1:
        return f"A2A-Version {text} is not one this server speaks: {SPOKEN}"
    return None


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


async def _unreadable(body: bytes) -> str | None:
    """Why `body` cannot be JSON the SDK may parse, or None."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"the request body is not valid UTF-8 (byte {exc.start}); JSON is UTF-8"
    # Cheap first: fewer brackets than the limit cannot nest deeper than it.
    if body.count(b"{") + body.count(b"[") > MAX_DEPTH:
        # The walk is Python, byte by byte: a large body is walked off the event loop, so
        # one caller's megabytes of brackets do not hold every other request.
        deep = (
            await asyncio.to_thread(json_depth, body)
            if len(body) > THREADED_DEPTH_BYTES
            else json_depth(body)
        )
        if deep > MAX_DEPTH:
            return f"the request's JSON nests deeper than {MAX_DEPTH} levels"
    return None


class RequestLimits:
    """What no request may exceed, checked before the SDK parses it: the body's size (413, from
    `Content-Length` before a byte is read when it says), the time to send it (408), its
    encoding (UTF-8), the nesting of its JSON and numbers JSON cannot carry (the protocol's
    parse or params error, not a codec's, Python's recursion limit's or a serializer's text),
    and an `A2A-Version` that is not a version number (VersionNotSupported, not an int
    overflow). It reads the body once and hands it on."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        jsonrpc_path: str = "/",
        body_timeout_s: float = 60.0,
        unlimited: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.jsonrpc_path = jsonrpc_path
        self.body_timeout_s = body_timeout_s
        self.unlimited = unlimited  # path prefixes whose routes bound their own bodies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(self.unlimited):
            await self.app(scope, receive, send)
            return
        rpc = speaks_jsonrpc(scope, self.jsonrpc_path)
        version = header(scope, b"a2a-version")
        if version is not None and (said := _version_refused(version)) is not None:
            await self._refuse(scope, send, rpc, Refusal.of(VersionNotSupportedError(said)))
            return
        if scope["method"] not in WITH_BODY:
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self.max_bytes:
            await refuse(scope, send, self._too_large(), jsonrpc_path=self.jsonrpc_path)
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.body_timeout_s)
        except TimeoutError:
            text = f"the request's body did not arrive within {self.body_timeout_s:g} s"
            await refuse(scope, send, too_slow(text), jsonrpc_path=self.jsonrpc_path)
            return
        if body is None:
            return  # the client went away
        if len(body) > self.max_bytes:
            await refuse(scope, send, self._too_large(), jsonrpc_path=self.jsonrpc_path)
            return
        unreadable = await _unreadable(body)
        if unreadable is not None:
            await self._refuse(scope, send, rpc, Refusal.of(JSONParseError(unreadable)))
            return
        call = parsed_call(body) if rpc else None
        if call is not None:
            keep_parsed(scope, body, call)
        # Python's parser takes both of these, so the call's id is known: the answer has it.
        request_id = call_id(call)
        number = nonfinite(body)
        if number is not None:
            refusal = Refusal.of(InvalidParamsError(number.message))
            await self._refuse(scope, send, rpc, refusal, request_id)
            return
        escape = lone_surrogate(body)
        if escape is not None:
            refusal = Refusal.of(InvalidParamsError(lone_surrogate_message(escape)))
            await self._refuse(scope, send, rpc, refusal, request_id)
            return
        if call is not None and is_notification(call):
            await self._notified(scope, receive, send, notification_run(call, version))
            return
        if call is not None and (answer := answer_now(call, version)) is not None:
            await send_json(send, 200, answer)
            return
        await self.app(scope, _replaying(body, receive), send)

    async def _notified(
        self, scope: Scope, receive: Receive, send: Send, run: bytes | None
    ) -> None:
        """A notification: the call it names run once (when it changes something), its answer
        dropped; then 204 and no body (`rpc_calls` says why)."""
        if run is not None:
            length = (b"content-length", str(len(run)).encode())
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]

            async def dropped(message: Message) -> None:
                return None

            await self.app(
                {**scope, "headers": [*headers, length]}, _replaying(run, receive), dropped
            )
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def _too_large(self) -> Refusal:
        return too_large(f"the request is larger than {self.max_bytes} bytes")

    async def _refuse(
        self,
        scope: Scope,
        send: Send,
        rpc: bool,
        refusal: Refusal,
        request_id: str | int | None = None,
    ) -> None:
        # JSON-RPC answers its errors with HTTP 200, as the SDK does; REST with 400.
        status = 200 if rpc else 400
        await refuse(
            scope,
            send,
            refusal,
            jsonrpc_path=self.jsonrpc_path,
            status=status,
            request_id=request_id,
        )

    async def _read(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            event: Message = await receive()
            if event["type"] == "http.disconnect":
                return None
            chunk: bytes = event.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                return b"".join(chunks) + chunk  # over the limit: said so by the caller
            chunks.append(chunk)
            if not event.get("more_body"):
                return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` with `body` as the request's (already read) body."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
