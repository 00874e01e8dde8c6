"""GetTask as a long poll (an A2A extension until the spec's next version ships it).

Every task has a generation: the number of its last event (`tasks.event_seq`). GetTask's
answer carries it in the task's metadata (`generation`), and every stream event and push body
carries its own. A GetTask that names the generation its caller has seen (`currentGeneration`)
is answered when the task has moved past it, or has ended, or after a bounded wait
(`timeoutMs`, at most `MAX_WAIT_S`), with the task as it then is. A caller that polls gets its
answer the moment it exists instead of at its next tick, with a fraction of the requests.

Where a caller says it:
- JSON-RPC, 1.0 `GetTask` and 0.3 `tasks/get`: `params.currentGeneration` (the field of the
  spec's draft) or `params.metadata.currentGeneration`, and the same for `timeoutMs`;
- HTTP+JSON, `GET /tasks/{id}` and 0.3's `GET /v1/tasks/{id}`: the query parameters
  `currentGeneration` and `timeoutMs`.

This middleware only waits: it takes its parameters out of the request and hands the rest on,
so the answer is the one a plain GetTask gets (the short read path or the SDK's route, errors
included). A waiting request holds no database connection: it waits on the process's one
LISTEN connection (`TaskNotifier.watch`) and reads the task through the read cache.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode

from a2a.utils.errors import InvalidParamsError
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.fast_reads import owner_reading, read_small, replay
from a2a_agent.edge.generations import NotAGeneration, whole_number
from a2a_agent.edge.refusals import Refusal, error_body, send_json
from persistence.errors import StoreError
from persistence.notify import LOST_WAKE_S, next_wake

if TYPE_CHECKING:
    from a2a_agent.edge.handler import AgentRequestHandler

EXTENSION_URI = "https://github.com/a2a-agent/a2a-agent/extensions/generation/v1"
MAX_WAIT_S = 30.0
WAIT_KEYS = ("currentGeneration", "timeoutMs")
READ_PREFIXES = ("/tasks/", "/v1/tasks/")


class Wait:
    """What a long poll asks: the generation seen, and how long the caller will wait."""

    def __init__(self, generation: Any, timeout_ms: Any) -> None:
        found = whole_number(generation, "currentGeneration")
        if found is None:
            raise NotAGeneration("timeoutMs is for a long poll: send currentGeneration with it")
        self.generation = found
        asked = whole_number(timeout_ms, "timeoutMs")
        self.seconds = MAX_WAIT_S if asked is None else min(asked / 1000, MAX_WAIT_S)


class LongPoll:
    """ASGI middleware: holds a GetTask that names `currentGeneration` until the task moves
    past it (or ends, or the wait runs out), then passes the plain GetTask on."""

    def __init__(self, app: ASGIApp, handler: AgentRequestHandler, path: str = "/") -> None:
        self.app = app
        self.handler = handler
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["method"] == "GET" and scope["path"].startswith(READ_PREFIXES):
            await self._rest(scope, receive, send)
        elif scope["method"] == "POST" and scope["path"] == self.path:
            await self._rpc(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _rest(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("query_string", b"").decode("latin-1")
        pairs = parse_qsl(raw, keep_blank_values=True)
        asked = {k: v for k, v in pairs if k in WAIT_KEYS}
        if not asked:
            await self.app(scope, receive, send)
            return
        task_id = scope["path"].rsplit("/", 1)[1]
        try:
            await self._wait(scope, task_id, Wait(*(asked.get(k) for k in WAIT_KEYS)))
        except NotAGeneration as exc:
            await _refuse(scope, send, str(exc), None, self.path)
            return
        rest = urlencode([(k, v) for k, v in pairs if k not in WAIT_KEYS]).encode()
        await self.app({**scope, "query_string": rest}, receive, send)

    async def _rpc(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, whole, extra = await read_small(receive)
        call = _long_poll_call(body) if whole else None
        if call is None:
            await self.app(scope, replay(body, whole, extra, receive), send)
            return
        request, params, asked = call
        try:
            wait = Wait(*(asked.get(k) for k in WAIT_KEYS))
            task_id = params.get("id")
            if not isinstance(task_id, str) or not task_id:
                raise NotAGeneration("id must name a task")
            await self._wait(scope, task_id, wait)
        except NotAGeneration as exc:
            await _refuse(scope, send, str(exc), request.get("id"), self.path)
            return
        plain = json.dumps({**request, "params": params}).encode()
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        headers.append((b"content-length", str(len(plain)).encode()))
        await self.app({**scope, "headers": headers}, replay(plain, True, None, receive), send)

    async def _wait(self, scope: Scope, task_id: str, wait: Wait) -> None:
        """Until the caller's task is past `wait.generation`, has ended, or the wait is over;
        a task the caller may not read is answered at once (by the plain GetTask's error)."""
        owner = owner_reading(scope)
        if owner is None:
            return
        deadline = time.monotonic() + wait.seconds
        async with self.handler.notifier.watch(task_id) as wake:
            while True:
                try:
                    row = await self.handler.store.get_task(task_id, owner)
                except StoreError:
                    return  # the plain GetTask says what went wrong
                if row is None or row.event_seq > wait.generation or row.is_terminal:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                await next_wake(wake, min(left, LOST_WAKE_S))


def _long_poll_call(body: bytes) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    """A GetTask (`GetTask`, 0.3 `tasks/get`) that asks to wait: the request, its params
    without the long poll's keys, and those keys; None for anything else."""
    if b"currentGeneration" not in body and b"timeoutMs" not in body:
        return None
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict) or request.get("method") not in ("GetTask", "tasks/get"):
        return None
    params = request.get("params")
    if not isinstance(params, dict):
        return None
    asked = {k: params.pop(k) for k in WAIT_KEYS if k in params}
    metadata = params.get("metadata")
    if isinstance(metadata, dict):
        asked.update({k: metadata.pop(k) for k in WAIT_KEYS if k in metadata})
        if not metadata:
            del params["metadata"]
    return (request, params, asked) if asked else None


async def _refuse(
    scope: Scope, send: Send, message: str, request_id: Any, jsonrpc_path: str
) -> None:
    refusal = Refusal.of(InvalidParamsError(message))
    body = error_body(scope, refusal, jsonrpc_path=jsonrpc_path, request_id=request_id)
    if "jsonrpc" in body:
        await send_json(send, 200, body)  # a JSON-RPC error travels in a 200, as the SDK's
    else:
        await send_json(send, refusal.http_status, body)
