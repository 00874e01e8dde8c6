"""What a push notification's body is, by the A2A version of the client that made the config.

A 1.0 receiver gets each event as a `StreamResponse` (a status or an artifact update), as a
stream subscriber does. A 0.3 receiver gets a `Task` in 0.3's JSON (`kind: "task"`, parts with
`kind`), as the a2a-sdk 0.3 server sent them and 0.3 receivers (CrewAI's result store, which
keeps the last Task it got per task id and reads its status, status message and artifacts)
expect: the task as of that event, folded from the event log (the status of the last status
event up to it, the last version of each artifact), so a notification sent again after a crash
or a retry says what it said the first time. The history is not in it (it is not in the event
log; GetTask has it). Both carry the event id (`<task>:<seq>`) in their metadata.
"""

from __future__ import annotations

import json
from typing import Protocol

from a2a.compat.v0_3.conversions import to_compat_task
from a2a.types.a2a_pb2 import (
    Artifact,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from a2a_agent.edge.convert import to_event, with_event_id
from persistence.push import PushEvent

V03 = "0.3"


class Payload(Protocol):
    def body(self, event: PushEvent) -> bytes | None:
        """The POST body for `event` (the events of one config, given in order), or None
        when the event is nothing a receiver is told of."""
        ...


class StreamResponses:
    """A2A 1.0: each event as the StreamResponse a subscriber gets."""

    def __init__(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id
        self.context_id = context_id

    def body(self, event: PushEvent) -> bytes | None:
        converted = to_event(self.task_id, self.context_id, event.body)
        if converted is None:
            return None
        with_event_id(converted, self.task_id, event.seq)
        if isinstance(converted, TaskStatusUpdateEvent):
            response = StreamResponse(status_update=converted)
        else:
            response = StreamResponse(artifact_update=converted)
        return json.dumps(MessageToDict(response)).encode()


class TasksAsOf:
    """A2A 0.3: at each event, the whole Task as of that event, in 0.3's JSON.

    `base` is the task as of the config's cursor (the last status event and the last event
    of each artifact up to it), read with the claim; each event sent is folded in after it.
    """

    def __init__(self, task_id: str, context_id: str, base: list[PushEvent]) -> None:
        self.task_id = task_id
        self.context_id = context_id
        self._status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        self._artifacts: dict[str, Artifact] = {}
        for event in base:
            self._fold(event)

    def _fold(self, event: PushEvent) -> bool:
        """Take `event` into the task; whether it is one a receiver is told of."""
        body = event.body
        if body.get("kind") == "artifact" and body.get("data") is None:
            self._artifacts.pop(str(body.get("name")), None)  # gone (a plan emptied)
            return False
        converted = to_event(self.task_id, self.context_id, body)
        if converted is None:
            return False
        if isinstance(converted, TaskStatusUpdateEvent):
            self._status = converted.status
        else:
            self._artifacts[converted.artifact.artifact_id] = converted.artifact
        return True

    def body(self, event: PushEvent) -> bytes | None:
        if not self._fold(event):
            return None
        task = Task(
            id=self.task_id,
            context_id=self.context_id,
            status=self._status,
            artifacts=list(self._artifacts.values()),
        )
        with_event_id(task, self.task_id, event.seq)
        compat = to_compat_task(task)
        return compat.model_dump_json(by_alias=True, exclude_none=True).encode()


def payload_for(protocol: str, task_id: str, context_id: str, base: list[PushEvent]) -> Payload:
    if protocol == V03:
        return TasksAsOf(task_id, context_id, base)
    return StreamResponses(task_id, context_id)
