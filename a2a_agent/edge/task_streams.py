"""A task's events as a stream: SendStreamingMessage, SubscribeToTask (which resumes after
a `Last-Event-ID`), and the wait of a blocking SendMessage, all read from the task's event log
as the notifier wakes them. Each event carries its event id (`<task id>:<seq>`), which
`streams.py` writes as the SSE `id:` line.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.types.a2a_pb2 import SendMessageRequest, SubscribeToTaskRequest
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError

from a2a_agent.edge import scopes
from a2a_agent.edge.convert import (
    FINAL_STATES,
    is_final_event,
    to_event,
    to_task,
    with_event_id,
    with_said,
)
from persistence.errors import StoreUnavailable
from persistence.notify import TaskNotifier
from persistence.records import JSON, TaskRow
from persistence.tasks import TaskStore

# A wake lost (a dropped LISTEN connection) delays an event by at most this long.
FALLBACK_POLL_S = 5.0


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


class TaskStreamMethods:
    store: TaskStore
    notifier: TaskNotifier

    async def _load(self, task_id: str, owner: str) -> TaskRow:
        raise NotImplementedError  # the handler's

    async def submit(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[TaskRow, JSON | None]:
        raise NotImplementedError  # the handler's

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        row, said = await self.submit(params, context)
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
