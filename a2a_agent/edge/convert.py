"""Conversions between our stored records and A2A 1.0 protobuf types."""

from __future__ import annotations

import base64
from datetime import datetime
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
from google.protobuf.struct_pb2 import Struct, Value
from google.protobuf.timestamp_pb2 import Timestamp

from a2a_agent.whole_numbers import keep_whole_numbers
from a2a_agent.wire import to_wire
from persistence.records import JSON, TaskRow

# Every task, event and DataPart we convert goes to JSON through protobuf's printer, which
# would write each count as a float; every process that converts imports this module.
keep_whole_numbers()

STATES = (
    "submitted",
    "working",
    "input_required",
    "auth_required",
    "completed",
    "failed",
    "canceled",
    "rejected",
)
STATE_TO_PROTO: dict[str, str] = {state: f"TASK_STATE_{state.upper()}" for state in STATES}
PROTO_TO_STATE: dict[int, str] = {TaskState.Value(v): k for k, v in STATE_TO_PROTO.items()}
FINAL_STATES = frozenset(
    {"completed", "failed", "canceled", "rejected", "input_required", "auth_required"}
)


def message_to_json(message: Message) -> JSON:
    return cast(JSON, MessageToDict(message, preserving_proto_field_name=False))


def message_from_json(data: JSON) -> Message:
    return cast(Message, ParseDict(data, Message(), ignore_unknown_fields=True))


def _timestamp(at: datetime | str) -> Timestamp:
    ts = Timestamp()
    if isinstance(at, str):
        ts.FromJsonString(at.replace("+00:00", "Z") if at.endswith("+00:00") else at)
    else:
        ts.FromDatetime(at)
    return ts


def _status_message(
    task_id: str, context_id: str, text: str | None, data: JSON | None = None
) -> Message | None:
    """The status message: its text, and a DataPart when the status carries data (a pending
    request: {"approvalRequest": {...}})."""
    if not text and not data:
        return None
    parts = [Part(text=text)] if text else []
    if data:
        parts.append(_data_part(to_wire(data)))
    return Message(
        message_id=f"{task_id}-status",
        context_id=context_id,
        task_id=task_id,
        role=Role.ROLE_AGENT,
        parts=parts,
    )


def _data_part(payload: JSON) -> Part:
    value = Value()
    value.struct_value.update(payload)
    return Part(data=value, media_type="application/json")


def plan_artifact(plan: JSON) -> Artifact:
    return Artifact(
        artifact_id="plan",
        name="plan",
        description="The plan with each item's status, attempts, verification evidence and commit.",
        parts=[_data_part({"plan": to_wire(plan)})],
    )


def report_artifact(report: JSON) -> Artifact:
    # The result files are artifacts of their own; the report lists them without their bytes.
    outputs = [{k: v for k, v in o.items() if k != "inline"} for o in report.get("outputs") or []]
    shown = {**report, "outputs": outputs} if outputs else report
    return Artifact(
        artifact_id="report",
        name="final-report",
        description="What was done, what passed and what remains.",
        parts=[Part(text=str(report.get("summary", ""))), _data_part({"report": to_wire(shown)})],
    )


OUTPUT_DESCRIPTIONS = {
    "diff": "The run's changes against its start commit (git apply).",
    "bundle": "The run's commits as a git bundle (git fetch from it).",
    "files": "The files the run changed, with their sizes.",
}


def output_artifact(output: JSON) -> Artifact:
    """A result of the run: a file inline (small) or by URL (its owner's key fetches it), or
    the list of files changed."""
    name = str(output.get("name"))
    if output.get("files") is not None:
        parts = [_data_part({"files": to_wire(output["files"]), "base": output.get("base"),
                             "head": output.get("head")})]  # fmt: skip
    elif output.get("inline") is not None:
        body = base64.b64decode(str(output["inline"]))
        parts = [Part(raw=body, filename=str(output["filename"]), media_type=output["media_type"])]
    else:
        parts = [
            Part(url=str(output["url"]), filename=str(output["filename"]),
                 media_type=str(output["media_type"]))
        ]  # fmt: skip
    artifact = Artifact(
        artifact_id=name,
        name=name,
        description=OUTPUT_DESCRIPTIONS.get(name, ""),
        parts=parts,
    )
    about = {k: output[k] for k in ("size", "sha256", "url", "base", "head", "prerequisite")
             if output.get(k) is not None}  # fmt: skip
    if about:
        artifact.metadata.update(about)
    return artifact


def to_task(row: TaskRow, history_length: int | None) -> Task:
    status = TaskStatus(state=STATE_TO_PROTO[row.state], timestamp=_timestamp(row.status_at))
    message = _status_message(row.task_id, row.context_id, row.status_text, row.status_data)
    if message is not None:
        status.message.CopyFrom(message)
    history = row.history
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    task = Task(
        id=row.task_id,
        context_id=row.context_id,
        status=status,
        history=[message_from_json(m) for m in history],
    )
    if row.plan is not None:
        task.artifacts.append(plan_artifact(row.plan))
    if row.report is not None:
        task.artifacts.append(report_artifact(row.report))
        for output in row.report.get("outputs") or []:
            task.artifacts.append(output_artifact(output))
    # The task's generation: the number of its last event, which a long poll waits past.
    metadata = Struct()
    metadata.update({**to_wire(row.metadata or {}), "generation": row.event_seq})
    task.metadata.CopyFrom(metadata)
    return task


def to_event(
    task_id: str, context_id: str, body: JSON
) -> TaskStatusUpdateEvent | TaskArtifactUpdateEvent | None:
    """One stored event as the A2A stream event a subscriber (or a webhook) receives."""
    kind = body.get("kind")
    if kind == "status":
        status = TaskStatus(
            state=STATE_TO_PROTO[str(body["state"])], timestamp=_timestamp(str(body["at"]))
        )
        message = _status_message(task_id, context_id, body.get("text"), body.get("data"))
        if message is not None:
            status.message.CopyFrom(message)
        return TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)
    if kind == "artifact" and body.get("data") is not None:
        data: Any = body["data"]
        name = body.get("name")
        if name == "plan":
            artifact = plan_artifact(data)
        elif name == "report":
            artifact = report_artifact(data)
        else:
            artifact = output_artifact(data)
        return TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id=context_id,
            artifact=artifact,
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
