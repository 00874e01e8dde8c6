"""A new task's SendMessage, the plain case, without the SDK's per-request dispatch.

An orchestrator that delegates sends many new tasks and polls them; the polls take the short
read path (fast_reads.py), and this is the same for the send: a JSON-RPC `SendMessage` at
A2A 1.0 that starts a new task (no `taskId`) and asks for the task back at once
(`returnImmediately`). It is checked and stored by the handler's own `submit`, with the
call context the SDK would build, and answered as the SDK's route answers: the task from its
one view (`task_view.py`: the same JSON, though the keys of a Struct and of the stored
history may come in another order), or the handler's refusal through the SDK's own
`build_error_response` (the same code, message and details, and nothing stored). Everything
else goes the long way unchanged: a blocking send, a follow-up, an inline push config, a
streaming call, params the SDK's parser takes differently, other versions, and a failure
that is not an A2A error. tests/edge/test_fast_sends.py holds the two paths to the same
answers.
"""

from __future__ import annotations

import logging
from typing import Any

from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types import SendMessageRequest
from a2a.utils.errors import A2AError
from google.protobuf.json_format import ParseDict, ParseError
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.fast_reads import PLAIN_JSON, read_small, replay, respond_bytes, rpc_call
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.refusals import header
from a2a_agent.edge.task_view import json_bytes, reply_bytes, task_json, value
from persistence.errors import StoreError

MAX_BODY = 256 * 1024  # a plan of many items; larger sends go the long way
METHOD = "SendMessage"
PARAMS_KEYS = frozenset({"message", "configuration", "metadata"})
# What a configuration may hold here; an inline push config, for one, goes the long way.
CONFIG_KEYS = frozenset({"returnImmediately", "historyLength", "acceptedOutputModes"})

log = logging.getLogger(__name__)


class FastSends:
    """ASGI middleware: stores and answers a new task's plain SendMessage (see above);
    passes everything else on."""

    def __init__(self, app: ASGIApp, handler: AgentRequestHandler, path: str = "/") -> None:
        self.app = app
        self.handler = handler
        self.path = path
        self._contexts = DefaultServerCallContextBuilder()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope["path"] != self.path
            or header(scope, b"a2a-version") != "1.0"
        ):
            await self.app(scope, receive, send)
            return
        body, whole, extra = await read_small(receive, MAX_BODY)
        answer = await self._answer(scope, body) if whole and METHOD.encode() in body else None
        if answer is None:
            await self.app(scope, replay(body, whole, extra, receive), send)
            return
        await respond_bytes(send, answer, PLAIN_JSON)

    async def _answer(self, scope: Scope, body: bytes) -> bytes | None:
        call = _plain_send(body, scope)
        if call is None:
            return None
        request_id, params = call
        try:
            # As the SDK's route parses it (unknown fields ignored, for forward compatibility).
            request = ParseDict(params, SendMessageRequest(), ignore_unknown_fields=True)
        except (ParseError, ValueError, TypeError):
            return None
        if request.message.task_id:
            return None  # a follow-up: the long way (follow_ups.py)
        context = self._contexts.build(Request(scope))
        context.state["method"] = METHOD
        context.state["request_id"] = request_id
        try:
            row, said = await self.handler.submit(request, context)
            config = request.configuration
            history = config.history_length if config.HasField("history_length") else None
            task = task_json(row, history)
        except A2AError as refused:
            # As the SDK's route answers a handler's refusal (nothing was stored): one look at
            # the message, not two (a workspace's host is looked up once).
            return json_bytes(build_error_response(request_id, refused))
        except StoreError:
            return None  # the database, in the middle: the SDK's route tries and says so
        except Exception:
            # Not a 500: the SDK's route, which answers a failure as a JSON-RPC error, takes
            # it again (a task stored already comes back as the retry of its messageId).
            log.exception("the short send failed; the SDK's route takes the call")
            return None
        if said:
            task["metadata"].update(value(said))  # as `with_said` does to the Task
        return reply_bytes(request_id, task)


def _plain_send(body: bytes, scope: Scope) -> tuple[str | int, dict[str, Any]] | None:
    """A plain JSON-RPC SendMessage that asks for its task at once: its id and params."""
    call = rpc_call(body, METHOD, scope)
    if call is None:
        return None
    params = call[1]
    config = params.get("configuration")
    if set(params) - PARAMS_KEYS or not isinstance(params.get("message"), dict):
        return None
    if not isinstance(config, dict) or set(config) - CONFIG_KEYS:
        return None
    if config.get("returnImmediately") is not True:
        return None  # a blocking send waits for its task: the long way (task_streams.py)
    return call
