"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, MCP 2026-07-28) over the door's
tasks: `delegate` answered with a `CreateTaskResult` when the request declares the extension,
and its methods `tasks/get`, `tasks/update` and `tasks/cancel`, each acting as the caller
through `McpDoor`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from a2a.utils.errors import A2AError
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Extension, MethodBinding
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolRequestParams, InputResponses, RequestParams

from persistence.errors import StoreError
from persistence.records import JSON

if TYPE_CHECKING:
    from a2a_agent.mcp_door.server import McpDoor

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
MODERN = "2026-07-28"


class TaskIdParams(RequestParams):
    task_id: str


class UpdateParams(TaskIdParams):
    input_responses: InputResponses


def said(exc: A2AError | StoreError) -> str:
    """What a refusal of the handler or the store says."""
    return getattr(exc, "message", None) or str(exc)


class TasksExtension(Extension):
    """The MCP tasks extension (2026-07-28) over the door's tasks."""

    identifier = TASKS_EXTENSION

    def __init__(self, door: McpDoor) -> None:
        self.door = door

    def methods(self) -> list[MethodBinding]:
        return [
            MethodBinding("tasks/get", TaskIdParams, self.get),
            MethodBinding("tasks/update", UpdateParams, self.update),
            MethodBinding("tasks/cancel", TaskIdParams, self.cancel),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> Any:
        if params.name != "delegate" or not declared(ctx):
            return await call_next(ctx)
        try:
            row = await self.door.delegate(params.arguments or {}, ctx.request, ctx.request_id)
        except ToolError as exc:
            return {
                "resultType": "complete",
                "content": [_text(f"delegate: {exc}")],
                "isError": True,
            }
        return {"resultType": "task", **await self.door.task(row)}

    async def get(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> JSON:
        return await self.door.detailed(ctx.request, params.task_id)

    async def update(self, ctx: ServerRequestContext[Any, Any], params: UpdateParams) -> JSON:
        """Each answered request key once; a key the task no longer waits on is ignored (the
        extension says so), and a decline rejects what was asked."""
        task = await self.door.detailed(ctx.request, params.task_id)
        pending = task.get("inputRequests") or {}
        answers = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        for key, response in (answers.get("inputResponses") or {}).items():
            if key not in pending or not isinstance(response, dict):
                continue
            action = response.get("action")
            content = response.get("content") or {}
            if action == "accept":
                decision, note = str(content.get("decision", "")), content.get("note")
            elif action == "decline" and (refusal := _refusal(pending[key])) is not None:
                decision, note = refusal, content.get("note")
            else:
                continue  # the person closed the form: the request stays open
            try:
                await self.door.answer(
                    ctx.request, params.task_id, key, decision, str(note) if note else None
                )
            except (A2AError, StoreError) as exc:
                raise MCPError(code=INVALID_PARAMS, message=said(exc)) from exc
        return {}

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: TaskIdParams) -> JSON:
        try:
            # A task that had ended is answered the same: the extension's cancel is a wish,
            # and the task's status (tasks/get) says how it ended.
            await self.door.cancel(ctx.request, params.task_id)
        except (A2AError, StoreError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=said(exc)) from exc
        return {}


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client takes a task for an answer (MCP 2026-07-28 and the
    tasks extension declared in the request's capabilities)."""
    capabilities = ctx.session.client_capabilities
    extensions = getattr(capabilities, "extensions", None) or {}
    return ctx.protocol_version == MODERN and TASKS_EXTENSION in extensions


def _refusal(elicitation: JSON) -> str | None:
    """The option a declined form stands for: the request's `reject`, else its `stop`."""
    schema = elicitation["params"]["requestedSchema"]["properties"]["decision"]
    options = schema.get("enum") or []
    return next((o for o in ("reject", "stop") if o in options), None)


def _text(text: str) -> JSON:
    return {"type": "text", "text": text}
