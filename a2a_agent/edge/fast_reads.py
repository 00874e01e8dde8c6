"""GetTask over JSON-RPC and HTTP+JSON without the SDK's per-request dispatch, for the plain
case.

Polling GetTask is the call an orchestrator makes most. For a well-formed `GetTask` (A2A
version 1.0, params `id` and optionally `historyLength`) of a task the caller owns, this
answers with the bytes the SDK's dispatcher would send: the task converted to its protobuf
JSON once per stored row (the read cache hands out one row object until the task changes)
and kept. Everything else, errors included, goes to the SDK's route unchanged, so every
error code and message is the SDK's own.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any
from urllib.parse import parse_qs

from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from google.protobuf.json_format import MessageToDict
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_agent.edge.handler import AgentRequestHandler
from persistence.errors import StoreError
from persistence.records import TaskRow

MAX_BODY = 4096  # a GetTask is a few hundred bytes; anything larger goes the long way
MAX_CACHED = 10_000
GET_TASK_KEYS = frozenset({"id", "historyLength"})
VERSION = b"1.0"
REST_PREFIX = "/tasks/"
A2A_JSON = A2A_JSON_MEDIA_TYPE.encode()


def _json(value: Any) -> bytes:
    # What Starlette's JSONResponse (the SDK's response) writes.
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


class FastGetTask:
    """ASGI middleware: answers plain JSON-RPC GetTask calls on `path`, passes the rest on."""

    def __init__(self, app: ASGIApp, handler: AgentRequestHandler, path: str = "/") -> None:
        self.app = app
        self.handler = handler
        self.path = path
        self._bodies: OrderedDict[tuple[str, int | None], tuple[TaskRow, bytes]] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET" and scope["path"].startswith(REST_PREFIX):
            # The HTTP+JSON binding's GetTask: the same row, the same kept bytes.
            answer = await self._rest_answer(scope)
            if answer is None:
                await self.app(scope, receive, send)
            else:
                await _respond(send, answer, A2A_JSON)
            return
        if scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        body, whole, extra = await _read(receive)
        answer = await self._answer(scope, body) if whole else None
        if answer is None:
            await self.app(scope, _replay(body, whole, extra, receive), send)
            return
        await _respond(send, answer, b"application/json")

    async def _rest_answer(self, scope: Scope) -> bytes | None:
        """`GET /tasks/{id}[?historyLength=N]` at version 1.0, as the SDK's REST route
        answers it; anything else (a tenant, another parameter, 0.3) goes the long way."""
        task_id = scope["path"][len(REST_PREFIX) :]
        if not task_id or "/" in task_id or ":" in task_id:
            return None
        if _header(scope, b"a2a-version") != VERSION:
            return None
        history: int | None = None
        query = scope.get("query_string", b"")
        if query:
            params = parse_qs(query.decode("latin-1"), keep_blank_values=True)
            values = params.get("historyLength")
            if set(params) != {"historyLength"} or values is None or len(values) != 1:
                return None
            if not values[0].isdigit():
                return None
            history = int(values[0])
        return await self._task_bytes(scope, task_id, history)

    async def _task_bytes(self, scope: Scope, task_id: str, history: int | None) -> bytes | None:
        owner = _reader(scope)
        if owner is None:
            return None  # the SDK's route refuses it, saying why
        try:
            row = await self.handler.store.get_task(task_id, owner)
        except StoreError:
            return None  # the SDK's route says what went wrong
        if row is None or row.state == "submitted":
            return None  # a task not yet taken says where it waits (the handler's GetTask)
        return self._task_json(row, history)

    async def _answer(self, scope: Scope, body: bytes) -> bytes | None:
        if b"GetTask" not in body or _header(scope, b"a2a-version") != VERSION:
            return None
        try:
            request = json.loads(body)
        except ValueError:
            return None
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
            return None
        if request.get("method") != "GetTask" or set(request) - {
            "jsonrpc",
            "id",
            "method",
            "params",
        }:
            return None
        request_id, params = request.get("id"), request.get("params")
        if isinstance(request_id, bool) or not isinstance(request_id, str | int):
            return None
        if not isinstance(params, dict) or set(params) - GET_TASK_KEYS:
            return None
        task_id, history = params.get("id"), params.get("historyLength")
        if not isinstance(task_id, str) or not task_id:
            return None
        if history is not None and (
            isinstance(history, bool) or not isinstance(history, int) or history < 0
        ):
            return None
        task = await self._task_bytes(scope, task_id, history)
        if task is None:
            return None
        return b'{"result":' + task + b',"id":' + _json(request_id) + b',"jsonrpc":"2.0"}'

    def _task_json(self, row: TaskRow, history: int | None) -> bytes:
        key = (row.task_id, history)
        hit = self._bodies.get(key)
        if hit is not None and hit[0] is row:
            return hit[1]
        task = self.handler.task_of(row, history)
        data = _json(MessageToDict(task, preserving_proto_field_name=False))
        self._bodies[key] = (row, data)
        self._bodies.move_to_end(key)
        if len(self._bodies) > MAX_CACHED:
            self._bodies.popitem(last=False)
        return data


async def _respond(send: Send, body: bytes, media_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-length", str(len(body)).encode()),
                (b"content-type", media_type),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _reader(scope: Scope) -> str | None:
    """As the handler does: the caller's principal when its key may read, else None."""
    user, auth = scope.get("user"), scope.get("auth")
    if user is None or auth is None or "read" not in auth.scopes:
        return None
    return str(user.display_name) if user.is_authenticated else ""


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


async def _read(receive: Receive) -> tuple[bytes, bool, Message | None]:
    """The body read so far; whether it is whole (small and complete); and a message that
    came instead of more body (a disconnect), to hand on."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False, message
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True, None
        if size > MAX_BODY:
            return b"".join(chunks), False, None


def _replay(body: bytes, whole: bool, extra: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the downstream app the body already read, then the rest."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": not whole}]
    if extra is not None:
        pending.append(extra)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
