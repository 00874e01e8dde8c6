"""Our stored records as A2A 1.0 protobuf types, for the SDK's routes and our streams: each
made from its JSON view (task_view.py, where what a caller reads of a task is decided), by
the protocol's shapes alone; and messages to and from JSON."""

from __future__ import annotations

import base64
from typing import Any, TypeVar, cast

from a2a.types.a2a_pb2 import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import NullValue, Value

from a2a_agent.edge.task_view import STATE_NAMES, artifact_json, status_json, task_json
from a2a_agent.whole_numbers import keep_whole_numbers
from persistence.records import JSON, TaskRow

# Every task, event and DataPart we convert goes to JSON through protobuf's printer, which
# would write each count as a float; every process that converts imports this module.
keep_whole_numbers()

STATE_TO_PROTO: dict[str, str] = STATE_NAMES
PROTO_TO_STATE: dict[int, str] = {TaskState.Value(v): k for k, v in STATE_TO_PROTO.items()}
FINAL_STATES = frozenset(
    {"completed", "failed", "canceled", "rejected", "input_required", "auth_required"}
)


def message_to_json(message: Message) -> JSON:
    return cast(JSON, MessageToDict(message, preserving_proto_field_name=False))


def message_from_json(data: JSON) -> Message:
    return cast(Message, ParseDict(data, Message(), ignore_unknown_fields=True))


def _into(target: Value, data: Any) -> None:
    """`target` set to JSON `data` (a Struct or ListValue filled by protobuf's own helpers)."""
    if isinstance(data, dict):
        target.struct_value.update(data)
    elif isinstance(data, list):
        target.list_value.extend(data)
    elif data is None:
        target.null_value = NullValue.NULL_VALUE
    elif isinstance(data, bool):
        target.bool_value = data
    elif isinstance(data, int | float):
        target.number_value = data
    else:
        target.string_value = str(data)


def _part(data: JSON) -> Part:
    part = Part()
    if "text" in data:
        part.text = data["text"]
    elif "raw" in data:
        part.raw = base64.b64decode(data["raw"])
    elif "url" in data:
        part.url = data["url"]
    elif "data" in data:
        _into(part.data, data["data"])
    if "metadata" in data:
        part.metadata.update(data["metadata"])
    if "filename" in data:
        part.filename = data["filename"]
    if "mediaType" in data:
        part.media_type = data["mediaType"]
    return part


def _artifact(data: JSON) -> Artifact:
    artifact = Artifact(
        artifact_id=data.get("artifactId", ""),
        name=data.get("name", ""),
        description=data.get("description", ""),
        parts=[_part(p) for p in data["parts"]],
    )
    if "metadata" in data:
        artifact.metadata.update(data["metadata"])
    return artifact


def _status(data: JSON) -> TaskStatus:
    status = TaskStatus(state=TaskState.Value(data["state"]))
    if (said := data.get("message")) is not None:
        status.message.CopyFrom(
            Message(
                message_id=said["messageId"],
                context_id=said["contextId"],
                task_id=said["taskId"],
                role=Role.Value(said["role"]),
                parts=[_part(p) for p in said["parts"]],
            )
        )
    status.timestamp.FromJsonString(data["timestamp"])
    return status


def to_task(row: TaskRow, history_length: int | None) -> Task:
    """The row's Task for the SDK's routes: its JSON view (task_view.py), as protobuf."""
    view = task_json(row, history_length)
    task = Task(
        id=view["id"],
        context_id=view["contextId"],
        status=_status(view["status"]),
        artifacts=[_artifact(a) for a in view.get("artifacts", ())],
        history=[message_from_json(m) for m in view.get("history", ())],
    )
    task.metadata.update(view["metadata"])
    return task


def to_event(
    task_id: str, context_id: str, body: JSON
) -> TaskStatusUpdateEvent | TaskArtifactUpdateEvent | None:
    """One stored event as the A2A stream event a subscriber (or a webhook) receives."""
    kind = body.get("kind")
    if kind == "status":
        status = status_json(
            task_id,
            context_id,
            str(body["state"]),
            str(body["at"]),
            text=body.get("text"),
            data=body.get("data"),
        )
        return TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=_status(status))
    if kind == "artifact" and body.get("data") is not None:
        artifact = artifact_json(body.get("name"), body["data"])
        return TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id=context_id,
            artifact=_artifact(artifact),
            append=False,
            last_chunk=True,
        )
    return None


Identified = TypeVar("Identified", TaskStatusUpdateEvent, TaskArtifactUpdateEvent, Task)


def with_event_id(event: Identified, task_id: str, seq: int) -> Identified:
    """The event with its id (`<task id>:<seq>`) and number in its metadata: what a stream
    resumes from and a webhook deduplicates by; the number is also the task's generation
    after this event (edge/long_poll.py). On a stream's first frame (the task as it
    is), the id of the last event the snapshot includes."""
    event.metadata.update({"eventId": f"{task_id}:{seq}", "seq": seq, "generation": seq})
    return event


def with_said(task: Task, said: JSON | None) -> Task:
    """The task answered to a message, with what the answer says of that message in its
    metadata: `retry` (a message sent before: its messageId, and what became of an inline
    push config the retry carried) or `note` (a steering note: its text and who reads it)."""
    if said:
        task.metadata.update(said)
    return task


def is_final_event(body: JSON) -> bool:
    return body.get("kind") == "status" and body.get("state") in FINAL_STATES
