"""Our A2A RequestHandler: the SDK's interface over our store and run engine."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from datetime import UTC

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
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
    SubscribeToTaskRequest,
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
    UnsupportedOperationError,
)

from a2a_agent.delivery.guard import AllowList
from a2a_agent.edge import scopes
from a2a_agent.edge.answers import (
    ReplyIntent,
    from_approval,
    from_text,
    message_text,
    note_taken,
    pending_request,
)
from a2a_agent.edge.convert import (
    FINAL_STATES,
    PROTO_TO_STATE,
    is_final_event,
    message_to_json,
    to_event,
    to_task,
    with_event_id,
    with_said,
)
from a2a_agent.edge.generations import if_generation, stale
from a2a_agent.edge.intake import Intake, message_digest
from a2a_agent.edge.push_configs import PushConfigMethods, printable
from a2a_agent.edge.versions import protocol_of
from a2a_agent.engine import RunEngine
from a2a_agent.errors import ContentTypeError, MessageTooLarge, PlanError
from a2a_agent.observe import tracing
from persistence.errors import Conflict, NotFound, StoreError, StoreUnavailable
from persistence.notify import TaskNotifier
from persistence.push import PushConfigStore
from persistence.records import JSON, TaskRow
from persistence.replies import Note, Reply, ReplyStore
from persistence.tasks import CannotContinue, TaskStore

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
FALLBACK_POLL_S = 5.0
MAX_CONVERSIONS = 10_000


def _reused(message_id: str, task_id: str) -> str:
    return (
        f"messageId {message_id!r} was already used for a different message (task {task_id}); "
        "a retry must send the same message, and every new message needs its own messageId"
    )


def _cannot_continue(exc: CannotContinue) -> str:
    if exc.why == "no_workspace":
        return f"task {exc.task_id} has no workspace to start from (it ended before its work began)"
    if exc.why == "not_found":
        return f"{exc.named_by} names task {exc.task_id!r}, which does not exist (or is not yours)"
    if exc.why == "not_ended":
        return (
            f"task {exc.task_id} is {exc.state}; only a task that ended (completed, failed or "
            "canceled) can be continued or started from: wait for it, or cancel it first"
        )
    return f"task {exc.task_id} has no plan to continue (it ended before planning)"


def _last_event_id(context: ServerCallContext, row: TaskRow) -> int | None:
    """The event a reconnecting subscriber saw last (`Last-Event-ID`: `<task id>:<seq>` as
    sent, or just the number), if it says."""
    raw = str((context.state.get("headers") or {}).get("last-event-id") or "").strip()
    if not raw:
        return None
    task, _, number = raw.rpartition(":")
    if not number.isdigit() or (task and task != row.task_id):
        raise InvalidParamsError(
            f"Last-Event-ID {raw!r} is not an event of task {row.task_id}; send the id of the "
            "last event this stream sent (<task id>:<seq>)"
        )
    if int(number) > row.event_seq:
        raise InvalidParamsError(
            f"Last-Event-ID {raw!r} is after the task's last event ({row.event_seq})"
        )
    return int(number)


@dataclass(frozen=True)
class TaskListing:
    """ListTasks' answer before it becomes a message: the converted tasks themselves."""

    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


@dataclass
class AgentRequestHandler(PushConfigMethods, RequestHandler):
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

    async def _submit(
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
            await self._checked_url(inline.url)
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
                raise InvalidParamsError(_reused(message.message_id, row.task_id))
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
        if row.state == "submitted":
            await self.engine.start(row.task_id)
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

    async def _follow_up(
        self, owner: str, message: Message, by: str, generation: int | None = None
    ) -> tuple[TaskRow, JSON | None]:
        """A reply to the task's pending request, or a steering note while it works; each
        applied once per messageId, and, given a generation (ifGenerationMatch), only to the
        task as it was at that generation."""
        row = await self._load(message.task_id, owner)
        earlier = await self.store.message_claim(owner, message.message_id)
        if earlier is not None:
            if earlier.task_id == row.task_id and earlier.says(message_digest(message)):
                # This message was applied before: nothing happens twice.
                return row, {"retry": {"messageId": message.message_id}}
            raise InvalidParamsError(_reused(message.message_id, earlier.task_id))
        message.context_id = row.context_id
        try:
            approval = self.intake.follow_up_approval(message)
        except PlanError as exc:
            raise InvalidParamsError(str(exc)) from exc
        if row.is_terminal and approval is None:
            raise UnsupportedOperationError(
                f"task {row.task_id} is {row.state} and takes no more messages; "
                "send a new message without taskId to start a new task"
            )
        try:
            text = message_text(message)
            request = pending_request(row.status_data)
            if approval is not None:
                intent = from_approval(approval, self.intake.budget_caps, None)
            elif row.state == "input_required" and request is not None:
                intent = from_text(text, request)
            else:
                intent = None
        except PlanError as exc:
            raise InvalidParamsError(str(exc)) from exc
        if intent is None:
            noted = await self._note(row, message, text, generation)
            return noted, {"note": note_taken(noted, text)}
        return await self._answer(row, message, intent, by, generation), None

    async def _note(
        self, row: TaskRow, message: Message, text: str, generation: int | None
    ) -> TaskRow:
        if not text:
            raise InvalidParamsError(
                f"task {row.task_id} is {row.state}: a follow-up to it is a text (a note for "
                "its work) or, when it asks, an approval; this message has neither"
            )
        noted = await self.replies.note(
            row.task_id,
            Note(
                owner=row.owner,
                text=text,
                message=message_to_json(message),
                message_id=message.message_id,
                digest=message_digest(message),
                if_generation=generation,
            ),
        )
        if noted.result == "stale":
            raise stale(row.task_id, generation, noted.generation)
        if noted.result == "not_working" and noted.row is not None:
            raise UnsupportedOperationError(
                f"task {row.task_id} is {noted.row.state} and takes no notes now"
            )
        if noted.row is None:
            raise TaskNotFoundError(f"task {row.task_id!r} does not exist (or is not yours)")
        return noted.row

    async def _answer(
        self,
        row: TaskRow,
        message: Message,
        intent: ReplyIntent,
        by: str,
        generation: int | None = None,
    ) -> TaskRow:
        answered = await self.replies.answer(
            row.task_id,
            Reply(
                owner=row.owner,
                decision=intent.decision,
                approval_id=intent.approval_id,
                note=intent.note,
                decided_by=by or None,
                budget=intent.budget,
                message=message_to_json(message),
                message_id=message.message_id,
                digest=message_digest(message),
                if_generation=generation,
            ),
        )
        task_id = row.task_id
        if answered.result == "stale":
            raise stale(task_id, generation, answered.generation)
        if answered.result == "resumed" and answered.row is not None:
            await self.engine.start(task_id, answered.segment)
            if answered.forwarded is not None:  # a child run got the answer too
                await self.engine.start(*answered.forwarded)
            return answered.row
        if answered.result == "repeat" and answered.row is not None:
            return answered.row
        pause = answered.pause or {}
        if answered.result == "decided":
            how = pause.get("decided_how")
            when = str(pause.get("decided_at", ""))[:19]
            raise InvalidParamsError(
                f"request `{pause.get('id')}` of task {task_id} was already decided: "
                f"{pause.get('decision')} "
                + ("by default, because it expired" if how == "expired" else f"({how})")
                + f" at {when}; this reply changed nothing"
            )
        if answered.result == "bad_decision":
            raise InvalidParamsError(
                f"{intent.decision!r} is not an option of request `{pause.get('id')}`; "
                f"its options are {pause.get('options')}; nothing changed"
            )
        if answered.result == "unknown":
            raise InvalidParamsError(
                f"task {task_id} has no request `{intent.approval_id}`; the pending one is "
                f"`{answered.pending}`; nothing changed"
            )
        if answered.result == "none_pending":
            raise InvalidParamsError(
                f"task {task_id} is {row.state} and has asked nothing, so there is no request "
                "to approve; nothing changed (a text while it works is a note for it)"
            )
        raise TaskNotFoundError(f"task {task_id!r} does not exist (or is not yours)")

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        row, said = await self._submit(params, context)
        config = params.configuration
        history = config.history_length if config.HasField("history_length") else None
        if not config.return_immediately and row.state not in FINAL_STATES:
            # Blocking: until the task ends or waits for input (A2A 1.0 §3.2.2); a retry of a
            # message whose task already did so answers at once.
            async for _ in self._follow(row):
                pass
            row = await self._load(row.task_id, row.owner)
        return with_said(to_task(row, history), said)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        row, said = await self._submit(params, context)
        yield with_event_id(with_said(to_task(row, None), said), row.task_id, row.event_seq)
        if row.state in FINAL_STATES:
            return  # a retry of a message whose task already ended or waits for input
        async for event in self._follow(row):
            yield event

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        row = await self._load(params.id, scopes.owner(context, "read"))
        after = _last_event_id(context, row)
        if after is not None:
            # A reconnect: exactly the events after the last one the client saw.
            async for event in self._follow(row, after=after):
                yield event
            return
        if row.is_terminal:
            raise UnsupportedOperationError(
                f"task {row.task_id} is already {row.state}; use GetTask to read its result"
            )
        yield with_event_id(to_task(row, None), row.task_id, row.event_seq)
        async for event in self._follow(row):
            yield event

    async def _follow(self, row: TaskRow, *, after: int | None = None) -> AsyncGenerator[Event]:
        """Events after the snapshot `row` (or after event `after`), until the task ends or
        waits for input. Each carries its event id."""
        seq = row.event_seq if after is None else after
        if row.is_terminal and seq >= row.event_seq:
            return
        async with self.notifier.watch(row.task_id) as wake:
            while True:
                wake.clear()
                try:
                    events = await self.store.events_after(row.task_id, seq)
                except StoreUnavailable:
                    events = []
                for event_seq, body in events:
                    seq = event_seq
                    event = to_event(row.task_id, row.context_id, body)
                    if event is not None:
                        yield with_event_id(event, row.task_id, event_seq)
                    if is_final_event(body):
                        return
                try:
                    await asyncio.wait_for(wake.wait(), FALLBACK_POLL_S)
                except TimeoutError:
                    continue

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
