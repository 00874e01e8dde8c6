"""MCP tasks in their 2025-11-25 form, for clients that speak only it: VS Code's Copilot Chat
and every client built on the TypeScript `@modelcontextprotocol/sdk` 1.x (`callToolStream`).

The `mcp` SDK 2.x left this form out: its 2025-11-25 surface has no `tasks/*` methods, and it
sieves a `tools/call` answer down to a `CallToolResult`. So this middleware of the SDK's server
serves it on connections that negotiated 2025-11-25, reading each request and shaping each
answer with the SDK's own 2025-11-25 wire models (`mcp_types._v2025_11_25`):

- `initialize`: the server's capabilities gain `tasks` (`list`, `cancel`, `tools/call`), and
  `tools/list` marks `delegate` `execution.taskSupport: optional`, so a client may ask for a
  task (`tools/call` with `task`) or call it plainly (the task's id at once, as before).
- `tools/call` of `delegate` with `task`: a `CreateTaskResult`, once the task is stored.
- `tasks/get`, `tasks/list` (the caller's own tasks, a page at a time), `tasks/cancel`.
- `tasks/result`: waits (on the process's one LISTEN connection, no database connection of its
  own) until the task ends, then the tool's result. A task that waits for a person answers at
  once with what it asks and how to answer: the form would send the question as an
  elicitation on the request's stream, which this door's stateless connections do not have,
  so the answer goes through `answer_task` (or the dashboard, the CLI, A2A).

An MCP task is an A2A task in either form: the same row, the same owner checks, the same
`delegate` (a retried call with the same request id and arguments makes one task).
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types import _v2025_11_25 as legacy
from pydantic import BaseModel, ValidationError

from a2a_agent.mcp_door import shapes
from persistence.errors import StoreError
from persistence.notify import next_wake
from persistence.records import JSON, TaskRow

if TYPE_CHECKING:
    from a2a_agent.mcp_door.server import McpDoor

VERSION = "2025-11-25"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TASK_TOOLS = ("delegate",)  # the tools a client may run as a task
PAGE_SIZE = 50
Model = TypeVar("Model", bound=BaseModel)


class LegacyTasks:
    """The middleware; `door` delegates, reads, answers and cancels as the caller."""

    def __init__(self, door: McpDoor) -> None:
        self.door = door

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method == "initialize":
            return _with_task_capability(await call_next(ctx))
        if ctx.protocol_version != VERSION:
            return await call_next(ctx)
        params: JSON = ctx.params if isinstance(ctx.params, dict) else {}
        if ctx.method == "tools/list":
            return _with_task_support(await call_next(ctx))
        if ctx.method == "tools/call" and params.get("task") is not None:
            return await self._create(ctx, params)
        served = {
            "tasks/get": self._get,
            "tasks/result": self._result,
            "tasks/list": self._list,
            "tasks/cancel": self._cancel,
        }.get(ctx.method)
        return await served(ctx, params) if served else await call_next(ctx)

    async def _create(self, ctx: ServerRequestContext[Any, Any], params: JSON) -> JSON:
        request = _parsed(legacy.CallToolRequestParams, params)
        if request.name not in TASK_TOOLS:
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"{request.name} is not run as a task here; call it without `task`",
            )
        try:
            row = await self.door.delegate(request.arguments or {}, ctx.request, ctx.request_id)
        except ToolError as exc:
            # The tool refused its arguments: a tool error, as a plain call would give it.
            failed = {"content": [{"type": "text", "text": f"delegate: {exc}"}], "isError": True}
            return _dumped(_parsed(legacy.CallToolResult, failed))
        created = _parsed(legacy.CreateTaskResult, {"task": await self._task(row)})
        return _dumped(created)

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: JSON) -> JSON:
        row = await self._row(ctx, _task_id(params))
        return _dumped(_parsed(legacy.GetTaskResult, await self._task(row)))

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: JSON) -> JSON:
        task_id = _task_id(params)
        await self._row(ctx, task_id)  # another's task is refused as every method refuses it
        row, canceled = await self.door.cancel(ctx.request, task_id)
        if not canceled:
            # The 2025-11-25 form refuses a cancel of an ended task, saying how it ended.
            raise MCPError(
                code=INVALID_PARAMS,
                message=f"task {task_id} has ended ({row.state}); it cannot be cancelled",
            )
        return _dumped(_parsed(legacy.CancelTaskResult, await self._task(row)))

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: JSON) -> JSON:
        request = _parsed(legacy.PaginatedRequestParams, params)
        owner = self.door.owner(ctx.request, "read")
        try:
            page = await self.door.handler.store.list_tasks(
                owner,
                context_id=None,
                state=None,
                after=None,
                page_size=PAGE_SIZE,
                cursor=request.cursor or None,
            )
        except StoreError as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"cursor: {exc}") from None
        tasks = []
        for row in page.tasks:
            fields = await self.door.listed_task(row)
            if fields is not None:  # None: removed (the retention) since the page was read
                tasks.append(_legacy_task(fields))
        listed: JSON = {"tasks": tasks}
        if page.next_cursor:
            listed["nextCursor"] = page.next_cursor
        return _dumped(_parsed(legacy.ListTasksResult, listed))

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: JSON) -> JSON:
        """The tool's result once the task has ended; what it asks, if it waits for a person."""
        task_id = _task_id(params)
        async with AsyncExitStack() as stack:
            # Watch before the first read, so a change between the two is not missed.
            wake = await stack.enter_async_context(self.door.handler.notifier.watch(task_id))
            row = await self._row(ctx, task_id)
            while shapes.MCP_STATUS[row.state] == "working":
                await next_wake(wake)
                row = await self._row(ctx, task_id)
        if row.state == "canceled":
            raise MCPError(code=INVALID_PARAMS, message=f"task {task_id} was cancelled")
        result = _waiting_result(row) if row.state == "input_required" else shapes.tool_result(row)
        result.pop("resultType", None)  # a 2026-era field
        result["_meta"] = {RELATED_TASK: {"taskId": task_id}}
        return _dumped(_parsed(legacy.CallToolResult, result))

    async def _row(self, ctx: ServerRequestContext[Any, Any], task_id: str) -> TaskRow:
        return await self.door.caller_row(ctx.request, task_id)

    async def _task(self, row: TaskRow) -> JSON:
        return _legacy_task(await self.door.task(row))


def _legacy_task(fields: JSON) -> JSON:
    """The 2025-11-25 Task of the door's task fields (`McpDoor.task`): the 2026 form's
    fields, renamed."""
    task: JSON = {
        "taskId": fields["taskId"],
        "status": fields["status"],
        "createdAt": fields["createdAt"],
        "lastUpdatedAt": fields["lastUpdatedAt"],
        "ttl": None,  # kept until the service's retention removes it
        "pollInterval": fields["pollIntervalMs"],
    }
    if fields.get("statusMessage"):
        task["statusMessage"] = fields["statusMessage"]
    return _dumped(_parsed(legacy.Task, task))


def _with_task_capability(result: HandlerResult) -> HandlerResult:
    """The 2025-11-25 handshake's answer, declaring the task methods served here."""
    if not isinstance(result, dict) or result.get("protocolVersion") != VERSION:
        return result
    tasks = _parsed(legacy.Tasks1, {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    capabilities = {**result.get("capabilities", {}), "tasks": _dumped(tasks)}
    return {**result, "capabilities": capabilities}


def _with_task_support(result: HandlerResult) -> HandlerResult:
    if not isinstance(result, dict):
        return result
    support = _dumped(_parsed(legacy.ToolExecution, {"taskSupport": "optional"}))
    tools = [
        {**tool, "execution": support} if tool.get("name") in TASK_TOOLS else tool
        for tool in result.get("tools", [])
    ]
    return {**result, "tools": tools}


def _waiting_result(row: TaskRow) -> JSON:
    """What a task that waits for a person asks, as the tool's (not yet final) result."""
    asked = shapes.status_message(row) or "The task waits for you."
    text = (
        f"{asked} Task {row.task_id} waits for this answer: call answer_task with task_id "
        f"{row.task_id!r}, the request's id and your decision, then follow it with get_task."
    )
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"taskId": row.task_id, "state": row.state},
        "isError": False,
    }


def _parsed(model: type[Model], params: JSON) -> Model:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'params'}: {e['msg']}" for e in exc.errors()
        )
        raise MCPError(code=INVALID_PARAMS, message=f"invalid params: {problems}") from None


def _task_id(params: JSON) -> str:
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise MCPError(code=INVALID_PARAMS, message="taskId (a task's id) is required")
    return task_id


def _dumped(model: BaseModel) -> JSON:
    """The wire form: the fields given, so a Task's `ttl: null` (kept until removed) stays."""
    dumped: JSON = model.model_dump(by_alias=True, mode="json", exclude_unset=True)
    return dumped
