"""The MCP door: the same runs, for clients that speak MCP (streamable HTTP at `/mcp`).

The `mcp` SDK speaks the protocol; this module only says what the tools do. Every tool goes
through the A2A request handler with the caller's key, scopes and principal, so an MCP task
is an A2A task: the same row, visible by GetTask, in the dashboard, the CLI and the metrics.

- `delegate` makes a task from a goal, a plan, a workspace, a budget and a publish target, as
  an A2A message's DataPart takes them (the tool's JSON Schema is the one `/schemas` serves).
  A client that declares the tasks extension (`io.modelcontextprotocol/tasks`, MCP
  2026-07-28) gets a `CreateTaskResult` once the task is stored, then polls it with
  `tasks/get` (or listens: `task_notifications.py`), answers its requests with
  `tasks/update` and stops it with `tasks/cancel` (`tasks_extension.py`).
  A client of MCP 2025-11-25 that asks for a task gets that version's form of it
  (`legacy_tasks.py`). Any other client gets the task's id at once, and the tools
  `get_task`, `answer_task` and `cancel_task` to do the same by polling.
- A retried `tools/call` (the same request id and arguments) makes one task: its messageId is
  derived from both, and the handler applies a messageId once per caller. A request is
  answered once: the same answer again is a retry (its messageId is derived from the task,
  the request and the answer), and another is refused, saying how the request was decided.
"""

# No `from __future__ import annotations`: the SDK reads the tools' parameter types (and the
# schemas in them, made at run time) from the live annotations.
import asyncio
import contextlib
import hashlib
import json
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any

from a2a.helpers.proto_helpers import new_data_part
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import DefaultServerCallContextBuilder
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
)
from a2a.utils.errors import A2AError, TaskNotCancelableError
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from pydantic import Field
from starlette.requests import Request
from starlette.types import ASGIApp

from a2a_agent.edge import scopes
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.mcp_door import shapes
from a2a_agent.mcp_door.arguments import PlainTool, closed, unknown_arguments
from a2a_agent.mcp_door.legacy_tasks import LegacyTasks
from a2a_agent.mcp_door.task_notifications import TaskListeners
from a2a_agent.mcp_door.tasks_extension import TasksExtension, declared, said
from a2a_agent.mcp_door.versions import KnownVersions
from a2a_agent.watched import watch
from persistence.errors import StoreError
from persistence.records import JSON, TaskRow

CREATED_KEPT = 10_000  # submission times kept (a few dozen bytes each)
DATA_KEYS = ("plan", "workspace", "budget", "publish")
# The tools' arguments, described in their schemas: a caller that leaves one out is told what
# it is (`arguments.refused`).
TaskId = Annotated[str, Field(description="the id delegate returned")]


def _context(request: Request | None) -> ServerCallContext:
    """The A2A call context of an MCP request, as the A2A routes build it (the door's
    middleware authenticated the request: its key's principal and scopes), speaking 1.0."""
    if request is None:
        raise MCPError(code=INVALID_PARAMS, message="the MCP door takes HTTP requests only")
    context = DefaultServerCallContextBuilder().build(request)
    context.state["headers"]["a2a-version"] = "1.0"  # an MCP request names no A2A version
    return context


def _message_id(kind: str, *parts: Any) -> str:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
    return f"mcp-{kind}-{digest[:32]}"


class McpDoor:
    """The MCP server of this service, mounted at `PATH`; `lifespan` runs its sessions."""

    def __init__(
        self, handler: AgentRequestHandler, schemas: dict[str, JSON], *, max_body_bytes: int
    ) -> None:
        self.handler = handler
        self._created: OrderedDict[str, datetime] = OrderedDict()
        self.server = MCPServer(
            "a2a-agent",
            instructions="Delegate long, verified work (a plan of items, each with a check "
            "command) and follow it to its end: the work runs in the background, durably.",
            extensions=[TasksExtension(self)],
            tools=self._tools(schemas),
        )
        self.server.middleware.append(TaskListeners(self, declared))
        self.server.middleware.append(LegacyTasks(self))
        self.server.streamable_http_app(
            json_response=True,
            stateless_http=True,
            # The door's own middleware checks the Host header (TrustedHosts).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            # The door's RequestLimits refuses a larger body first, in JSON-RPC; the SDK's own
            # limit (4 MiB by default) would refuse a smaller one in plain text.
            max_request_body_size=max_body_bytes,
        )
        self._asgi = KnownVersions(StreamableHTTPASGIApp(self.server.session_manager))

    @property
    def asgi(self) -> ASGIApp:
        """The door's ASGI app, served at `PATH` (by `doorway.Doorway`)."""
        return self._asgi

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[None]:
        """The SDK's session manager, run by a task of its own: its task group must be left
        by the task that entered it, and a lifespan may be entered and left by two (the
        in-process tests' fixtures). The task is watched: if it ends before the shutdown
        cancels it, the process exits to be replaced (`watched`)."""
        ready = asyncio.Event()

        async def hold() -> None:
            async with self.server.session_manager.run():
                ready.set()
                await asyncio.Event().wait()  # until the shutdown cancels it

        holder = asyncio.create_task(hold(), name="mcp-sessions")
        started = asyncio.create_task(ready.wait())
        await asyncio.wait({holder, started}, return_when=asyncio.FIRST_COMPLETED)
        if holder.done():
            started.cancel()
            holder.result()  # it ended before it was ready: say why
        watch(holder, "the MCP door's session manager")
        try:
            yield
        finally:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder

    # ---- what the tools and the extension share -------------------------------------------

    async def delegate(self, arguments: JSON, request: Request | None, call_id: Any) -> TaskRow:
        """A task from a tool call's arguments, stored (and its run started) before this
        returns; ToolError, saying why, if the handler refuses it."""
        unknown = unknown_arguments(arguments, ("goal", *DATA_KEYS))
        if unknown:
            raise ToolError(unknown)
        parts = []
        goal = arguments.get("goal")
        if goal is not None and not isinstance(goal, str):
            raise ToolError("goal must be a text")
        if goal:
            parts.append(Part(text=goal))
        data = {k: arguments[k] for k in DATA_KEYS if arguments.get(k) is not None}
        if data:
            parts.append(new_data_part(data, "application/json"))
        if not parts:
            raise ToolError("delegate needs a goal (a text for the model) or a plan")
        message = Message(
            role=Role.ROLE_USER,
            message_id=_message_id("call", call_id, arguments),
            parts=parts,
        )
        send = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        context = _context(request)
        try:
            task = await self.handler.on_message_send(send, context)
            return await self._row(context, "submit", task.id)
        except (A2AError, StoreError) as exc:
            raise ToolError(said(exc)) from exc

    async def _row(self, context: ServerCallContext, scope: str, task_id: str) -> TaskRow:
        owner = scopes.owner(context, scope)
        row = await self.handler.store.get_task(task_id, owner)
        if row is None:
            raise MCPError(code=INVALID_PARAMS, message=f"there is no task {task_id!r} of yours")
        return row

    async def task(self, row: TaskRow) -> JSON:
        """The MCP Task for `row`, as every form of the door shows it: created when it was
        submitted, last updated at its last change (`shapes.task_fields`)."""
        return shapes.task_fields(row, await self._created_at(row))

    async def listed_task(self, row: TaskRow) -> JSON | None:
        """`task` for a row a listing read; None if the task was removed (the retention)
        since, so the list leaves it out and shows the rest."""
        created = await self._submitted(row)
        return None if created is None else shapes.task_fields(row, created)

    async def _created_at(self, row: TaskRow) -> datetime:
        created = await self._submitted(row)
        if created is None:  # removed (the retention) since its row was read
            message = f"there is no task {row.task_id!r} of yours"
            raise MCPError(code=INVALID_PARAMS, message=message)
        return created

    async def _submitted(self, row: TaskRow) -> datetime | None:
        """When the task was submitted (None: it is gone): read once, then kept (it never
        changes), so a poll or a listener's wake-up costs only the cached row."""
        created = self._created.get(row.task_id)
        if created is None:
            try:
                created = await self.handler.store.created_at(row.task_id, row.owner)
            except StoreError as exc:
                raise MCPError(code=INVALID_PARAMS, message=said(exc)) from exc
            if created is None:
                return None
            self._created[row.task_id] = created
            while len(self._created) > CREATED_KEPT:
                self._created.popitem(last=False)
        return created

    def owner(self, request: Request | None, scope: str) -> str:
        """Whose tasks the request may act on with `scope` (its key's principal)."""
        return scopes.owner(_context(request), scope)

    async def caller_row(self, request: Request | None, task_id: str) -> TaskRow:
        """The caller's task `task_id` (read scope); an MCP error, saying why, if it is not."""
        try:
            return await self._row(_context(request), "read", task_id)
        except (A2AError, StoreError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=said(exc)) from exc

    async def detailed(self, request: Request | None, task_id: str) -> JSON:
        row = await self.caller_row(request, task_id)
        return shapes.detailed_task(row, await self._created_at(row))

    async def answer(
        self, request: Request | None, task_id: str, key: str, decision: str, note: str | None
    ) -> TaskRow:
        """A reply to request `key` of the task, applied once per request."""
        approval: JSON = {"id": key, "decision": decision}
        if note:
            approval["note"] = note
        message = Message(
            role=Role.ROLE_USER,
            task_id=task_id,
            # The same answer sent again is one answer; another answer to a request already
            # decided is refused by the reply's own check, which says how it was decided.
            message_id=_message_id("answer", task_id, key, decision, note),
            parts=[new_data_part({"approval": approval}, "application/json")],
        )
        send = SendMessageRequest(
            message=message, configuration=SendMessageConfiguration(return_immediately=True)
        )
        context = _context(request)
        await self.handler.on_message_send(send, context)
        return await self._row(context, "read", task_id)

    async def cancel(self, request: Request | None, task_id: str) -> tuple[TaskRow, bool]:
        """Cancel the caller's task: its row after, and whether this cancel ended it (False:
        it had already ended, and is as it ended). Each form says that in its own way."""
        context = _context(request)
        try:
            await self.handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
            canceled = True
        except TaskNotCancelableError:
            canceled = False
        return await self._row(context, "read", task_id), canceled

    # ---- the tools ----------------------------------------------------------------------

    def _tools(self, schemas: dict[str, JSON]) -> list[Tool]:
        door = self

        async def delegate(  # noqa: PLR0917  (the tool's parameters are its arguments)
            ctx: Context,
            goal: str | None = None,
            plan: dict[str, Any] | None = None,
            workspace: dict[str, Any] | None = None,
            budget: dict[str, Any] | None = None,
            publish: dict[str, Any] | None = None,
        ) -> str:
            """Delegate long work to this service: a goal (in words, for the model to plan)
            or a plan of items, each verified by its own command, on a workspace of your code,
            within a budget. It runs in the background; follow it with get_task."""
            arguments = {
                "goal": goal,
                "plan": plan,
                "workspace": workspace,
                "budget": budget,
                "publish": publish,
            }
            context = ctx.request_context
            given = {k: v for k, v in arguments.items() if v is not None}
            row = await door.delegate(given, context.request, context.request_id)
            refused = shapes.refused_text(row)
            if refused is not None:
                raise ToolError(refused)
            return shapes.submitted_text(row)

        async def get_task(ctx: Context, task_id: TaskId) -> str:
            """A delegated task as it is now: its state, what it asks, or its result."""
            try:
                found = await door.detailed(ctx.request_context.request, task_id)
            except MCPError as exc:  # no such task of the caller's: the argument is wrong
                raise ToolError(exc.error.message) from exc
            return json.dumps(found)

        async def answer_task(
            ctx: Context,
            task_id: TaskId,
            request_id: Annotated[str, Field(description="its key in the task's inputRequests")],
            decision: Annotated[str, Field(description="one of its options, or your answer")],
            note: Annotated[str | None, Field(description="why, or what to do instead")] = None,
        ) -> str:
            """Answer what a task asks (its inputRequests key, one of its options)."""
            try:
                row = await door.answer(
                    ctx.request_context.request, task_id, request_id, decision, note
                )
            except (A2AError, StoreError) as exc:
                raise ToolError(said(exc)) from exc
            return json.dumps(await door.task(row))

        async def cancel_task(ctx: Context, task_id: TaskId) -> str:
            """Stop a delegated task; what it did so far stays in its report."""
            try:
                row, canceled = await door.cancel(ctx.request_context.request, task_id)
            except (A2AError, StoreError) as exc:
                raise ToolError(said(exc)) from exc
            if not canceled:  # the caller believes it stopped a task: it did not
                raise ToolError(shapes.ended_text(row))
            return json.dumps(await door.task(row))

        tools = [
            PlainTool.from_function(fn, structured_output=False)
            for fn in (delegate, get_task, answer_task, cancel_task)
        ]
        # delegate's arguments are the message DataPart's keys: their schemas are the ones
        # /schemas serves (each its own resource, by its $id, so its $refs resolve inside it).
        parameters = dict(tools[0].parameters)
        parameters["properties"] = {
            **parameters["properties"],
            **{key: schemas[key] for key in DATA_KEYS},
        }
        tools[0] = tools[0].model_copy(update={"parameters": parameters})
        return [tool.model_copy(update={"parameters": closed(tool.parameters)}) for tool in tools]
