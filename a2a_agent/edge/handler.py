"""Our A2A RequestHandler: the SDK's interface over our store and run engine.

Here: the reads (GetTask, ListTasks), a new task (SendMessage's submission), cancel and the
extended card. A message to a task that exists is `follow_ups.py`'s, a task's events as a
stream (and a blocking send's wait) `task_streams.py`'s, the push configs `push_configs.py`'s:
mixins of this class, each declaring what of the handler it uses.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from datetime import UTC

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
)

from a2a_agent.delivery.guard import AllowList
from a2a_agent.edge import scopes
from a2a_agent.edge.convert import (
    FINAL_STATES,
    PROTO_TO_STATE,
    to_task,
    with_said,
)
from a2a_agent.edge.follow_ups import FollowUpMethods, reused_message_id
from a2a_agent.edge.generations import if_generation
from a2a_agent.edge.intake import Intake
from a2a_agent.edge.push_configs import PushConfigMethods, printable
from a2a_agent.edge.task_streams import TaskStreamMethods
from a2a_agent.edge.versions import protocol_of
from a2a_agent.engine import RunEngine
from a2a_agent.errors import ContentTypeError, MessageTooLarge, PlanError
from a2a_agent.observe import tracing
from persistence.errors import Conflict, NotFound, StoreError, StoreUnavailable
from persistence.notify import TaskNotifier
from persistence.push import PushConfigStore
from persistence.records import JSON, TaskRow
from persistence.replies import ReplyStore
from persistence.tasks import CannotContinue, TaskStore

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
MAX_CONVERSIONS = 10_000


def _cannot_continue(exc: CannotContinue) -> str:
    if exc.why == "no_workspace":
        return f"task {exc.task_id} has no workspace to start from (it ended before its work began)"
    if exc.why == "not_found":
        return f"{exc.named_by} names task {exc.task_id!r}, which does not exist (or is not yours)"
    if exc.why == "not_ended" and exc.state == "rejected":
        # Ended, but at once: the store's check counts only the ends a run can reach.
        return (
            f"task {exc.task_id} was rejected before any work: it has no plan to continue and "
            "no workspace to start from; send a new task"
        )
    if exc.why == "not_ended":
        return (
            f"task {exc.task_id} is {exc.state}; only a task that ended (completed, failed or "
            "canceled) can be continued or started from: wait for it, or cancel it first"
        )
    return f"task {exc.task_id} has no plan to continue (it ended before planning)"


@dataclass(frozen=True)
class TaskListing:
    """ListTasks' answer before it becomes a message: the converted tasks themselves."""

    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


@dataclass
class AgentRequestHandler(FollowUpMethods, TaskStreamMethods, PushConfigMethods, RequestHandler):
    store: TaskStore
    replies: ReplyStore
    push: PushConfigStore
    allow: AllowList
    engine: RunEngine
    notifier: TaskNotifier
    intake: Intake
    _conversions: dict[tuple[str, int | None], tuple[TaskRow, Task]] = field(
        default_factory=dict, init=False, repr=False
    )

    # ---- reads -------------------------------------------------------------------------

    async def _load(self, task_id: str, owner: str) -> TaskRow:
        if not task_id:
            raise InvalidParamsError("a task id is required")
        printable(task_id, "the task id")
        try:
            row = await self.store.get_task(task_id, owner)
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; try again shortly") from exc
        if row is None:
            raise TaskNotFoundError(f"task {task_id!r} does not exist (or is not yours)")
        return row

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task:
        history = params.history_length if params.HasField("history_length") else None
        if history is not None and history < 0:
            raise InvalidParamsError("historyLength must be 0 or more")
        row = await self._load(params.id, scopes.owner(context, "read"))
        if row.state == "submitted":
            row = await self._queued(row)
        return self.task_of(row, history)

    async def _queued(self, row: TaskRow) -> TaskRow:
        """A task no worker has taken yet says where it waits: behind how many runs."""
        try:
            ahead = await self.store.queued_ahead(row.task_id)
        except StoreUnavailable:
            return row
        if ahead is None:
            return row
        where = f"behind {ahead} other task{'s' if ahead != 1 else ''}" if ahead else "next"
        return dataclasses.replace(
            row, status_text=f"queued {where}: it starts when a worker takes it"
        )

    def task_of(self, row: TaskRow, history: int | None) -> Task:
        """The Task for `row`, converted once per row object: the store's read cache hands out
        the same row until the task changes, and polling callers ask for it again and again.
        The SDK only serializes what we return, so sharing the object is safe."""
        key = (row.task_id, history)
        hit = self._conversions.get(key)
        if hit is not None and hit[0] is row:
            return hit[1]
        task = to_task(row, history)
        self._conversions[key] = (row, task)
        if len(self._conversions) > MAX_CONVERSIONS:
            self._conversions.pop(next(iter(self._conversions)))
        return task

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        page = await self.list_page(params, scopes.owner(context, "read"))
        return ListTasksResponse(
            tasks=page.tasks,
            next_page_token=page.next_page_token,
            page_size=page.page_size,
            total_size=page.total_size,
        )

    async def list_page(self, params: ListTasksRequest, owner: str) -> TaskListing:
        """A page of `owner`'s tasks (the short read path calls it too): each task converted
        once per row, as GetTask's are, and handed out as it was converted (a response
        message would hold copies)."""
        page_size = params.page_size if params.HasField("page_size") else DEFAULT_PAGE_SIZE
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            raise InvalidParamsError(f"pageSize must be between 1 and {MAX_PAGE_SIZE}")
        history = params.history_length if params.HasField("history_length") else None
        if history is not None and history < 0:
            raise InvalidParamsError("historyLength must be 0 or more")
        printable(params.context_id, "contextId")
        printable(params.page_token, "pageToken")
        state = PROTO_TO_STATE.get(params.status) if params.status else None
        after = (
            params.status_timestamp_after.ToDatetime(tzinfo=UTC)
            if params.HasField("status_timestamp_after")
            else None
        )
        try:
            page = await self.store.list_tasks(
                owner,
                context_id=params.context_id or None,
                state=state,
                after=after,
                page_size=page_size,
                cursor=params.page_token or None,
            )
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; try again shortly") from exc
        except StoreError as exc:
            raise InvalidParamsError(str(exc)) from exc
        return TaskListing(
            tasks=[self.task_of(row, history) for row in page.tasks],
            next_page_token=page.next_cursor or "",
            page_size=page_size,
            total_size=page.total,
        )

    # ---- writes ------------------------------------------------------------------------

    async def submit(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[TaskRow, JSON | None]:
        """Validate and store a message: a new task, or a follow-up to one. A messageId this
        caller sent before is never applied twice: the task it made comes back as it is now.
        What the reply says beyond the task goes in its metadata (`with_said`): a retry's
        messageId and what became of an inline push config it added; a note's text and who
        reads it."""
        message = params.message
        caller = scopes.owner(context, "approve" if message.task_id else "submit")
        inline = None
        if params.configuration.HasField("task_push_notification_config"):
            inline = params.configuration.task_push_notification_config
            if message.task_id:
                raise InvalidParamsError(
                    "an inline push config belongs to a new task's first message; for an "
                    "existing task use CreateTaskPushNotificationConfig"
                )
            await self._checked_config(inline)
        try:
            self.intake.check_message(params)
        except ContentTypeError as exc:
            raise ContentTypeNotSupportedError(str(exc)) from exc
        except MessageTooLarge as exc:
            raise InvalidRequestError(str(exc)) from exc
        except PlanError as exc:
            raise InvalidParamsError(str(exc)) from exc
        try:
            if message.task_id:
                # A person acting for the owner (the dashboard) is recorded as who decided.
                by = str(context.state.get("decided_by") or caller)
                return await self._follow_up(caller, message, by, if_generation(params))
            await self._within_active_limit(caller, message.message_id)
            task_id = str(uuid.uuid4())
            context_id = message.context_id or str(uuid.uuid4())
            message.task_id, message.context_id = task_id, context_id
            try:
                new = self.intake.new_task(task_id, caller, context_id, message)
                await self.intake.sources.check_remote(new)
            except PlanError as exc:
                raise InvalidParamsError(str(exc)) from exc
            if any(i.runs_commands for i in new.items):
                scopes.require(context, "run")
            caller_trace = (context.state.get("headers") or {}).get("traceparent")
            new = dataclasses.replace(
                new, trace_context=tracing.task_span(task_id, caller_trace or None)
            )
            submitted = await self.store.create_task(new)
        except CannotContinue as exc:
            raise InvalidParamsError(_cannot_continue(exc)) from exc
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; nothing was stored, send the message again") from exc
        row = submitted.row
        protocol = protocol_of(context)
        if submitted.repeated:
            if not submitted.same_message:
                raise InvalidParamsError(reused_message_id(message.message_id, row.task_id))
            # A retry: the task as it is now; its run was enqueued the first time. An inline
            # config the first send did not get to register (it died first, or did not carry
            # one) is registered now, from the task's first event.
            retry: JSON = {"messageId": message.message_id}
            if inline is not None:
                retry["pushConfig"] = await self._register_on_retry(
                    row.task_id, caller, inline, protocol
                )
            return row, {"retry": retry}
        if inline is not None:
            await self._register(row.task_id, caller, inline, from_seq=0, protocol=protocol)
        # Its run is not enqueued here: a worker's starter does that (engine/starter.py).
        return row, None

    async def _within_active_limit(self, caller: str, message_id: str) -> None:
        """A caller past its limit of tasks that have not ended is told so, and nothing is
        stored; a retry of a message that made its task before is answered as before."""
        limit = self.intake.max_active_tasks
        if not limit:
            return
        active = await self.store.active_tasks(caller)
        if active < limit or await self.store.message_claim(caller, message_id) is not None:
            return
        raise InvalidRequestError(
            f"this caller has {active} tasks that have not ended, and the service takes at "
            f"most {limit} at once from one caller (A2A_AGENT_MAX_ACTIVE_TASKS): wait for one "
            "to end, or cancel one, then send this message again; nothing was stored"
        )

    async def _register_on_retry(
        self, task_id: str, owner: str, inline: TaskPushNotificationConfig, protocol: str
    ) -> JSON:
        try:
            known = await self.push.configs(task_id, owner, None)
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; try again shortly") from exc
        for config in known:
            if (inline.id and config.id == inline.id) or (
                not inline.id and config.url == inline.url
            ):
                return {"id": config.id, "outcome": "alreadyRegistered"}
        made = await self._register(task_id, owner, inline, from_seq=0, protocol=protocol)
        return {"id": made.id, "outcome": "registered"}

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        row, said = await self.submit(params, context)
        config = params.configuration
        history = config.history_length if config.HasField("history_length") else None
        if not config.return_immediately and row.state not in FINAL_STATES:
            # Blocking: until the task ends or waits for input (A2A 1.0 §3.2.2); a retry of a
            # message whose task already did so answers at once.
            async for _ in self._follow(row):
                pass
            row = await self._load(row.task_id, row.owner)
        return with_said(to_task(row, history), said)

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task:
        caller = scopes.owner(context, "submit")
        before = (await self._load(params.id, caller)).segment
        try:
            row = await self.store.cancel_task(
                params.id, caller, "canceled at the caller's request"
            )
        except NotFound as exc:
            raise TaskNotFoundError(f"task {params.id!r} does not exist") from exc
        except Conflict as exc:
            raise TaskNotCancelableError(f"{exc}; a finished task cannot be canceled") from exc
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; the task was not canceled, try again") from exc
        await self.engine.cancel(row.task_id)
        if row.segment > before:
            # Nothing of the run was in flight (it waited for a person or a delegate): a
            # segment of its own closes the record and cancels the delegates.
            await self.engine.start(row.task_id, row.segment)
        return to_task(row, None)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError("this agent has no extended card")
