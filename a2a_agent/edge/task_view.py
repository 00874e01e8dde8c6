"""A task as callers read it, as JSON: the one place a stored task becomes A2A 1.0's Task.

`task_json` writes a row as the protocol's JSON (camelCase fields, enums by name, a
timestamp in RFC 3339, whole numbers whole), field for field what protobuf's printer writes
of the Task `to_task` (convert.py) makes of the same row: `to_task` builds that Task from
these pieces. The
short send (fast_sends.py) answers with it directly, without a Task between: building the
Task's Structs and printing them again were most of a send's conversion.

The history's messages are stored as protobuf's printer wrote them (the intake and the
follow-ups' `message_to_json`), so they are shown as stored, their keys in jsonb's order.
Numbers inside data are as protobuf's `Value` holds them: a double, written whole when it is
whole (whole_numbers.py). tests/edge/test_task_view.py holds the two to the same JSON.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from a2a_agent.whole_numbers import EXACT
from a2a_agent.wire import to_wire
from persistence.records import JSON, TaskRow

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
STATE_NAMES = {state: f"TASK_STATE_{state.upper()}" for state in STATES}
PLAN_DESCRIPTION = "The plan with each item's status, attempts, verification evidence and commit."
REPORT_DESCRIPTION = "What was done, what passed and what remains."
OUTPUT_DESCRIPTIONS = {
    "diff": "The run's changes against its start commit (git apply).",
    "bundle": "The run's commits as a git bundle (git fetch from it).",
    "files": "The files the run changed, with their sizes.",
}
OUTPUT_ABOUT = ("size", "sha256", "url", "base", "head", "prerequisite")
JSON_MEDIA = "application/json"


def json_bytes(value: Any) -> bytes:
    """`value` as Starlette's JSONResponse (the SDK's response) writes it."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def reply_bytes(request_id: str | int, task: JSON) -> bytes:
    """SendMessage's JSON-RPC answer with `task` (`task_json`), as the SDK's route writes it."""
    return json_bytes({"result": {"task": task}, "id": request_id, "jsonrpc": "2.0"})


def timestamp_text(at: datetime | str) -> str:
    """A time as protobuf's Timestamp is written in JSON (RFC 3339, UTC, 0/3/6/9 digits)."""
    ts = Timestamp()
    if isinstance(at, str):
        ts.FromJsonString(at.replace("+00:00", "Z") if at.endswith("+00:00") else at)
    else:
        ts.FromDatetime(at)
    return str(ts.ToJsonString())


def value(data: Any) -> Any:
    """JSON data as a protobuf `Value` holds and prints it: every number a double, written
    whole when whole (and within 2**53)."""
    kind = type(data)
    if kind is str:
        return data
    if kind is dict:
        return {str(k): value(v) for k, v in data.items()}
    if kind is list or kind is tuple:
        return [value(v) for v in data]
    if kind is int and abs(data) <= EXACT:
        return data
    if kind is int or kind is float:
        # As a double; then whole when whole (2**53 + 1 becomes 2**53, written whole).
        number = float(data)
        return int(number) if number.is_integer() and abs(number) <= EXACT else number
    return data  # bool, None


def data_part(payload: JSON) -> JSON:
    return {"data": value(payload), "mediaType": JSON_MEDIA}


def status_message(
    task_id: str, context_id: str, text: str | None, data: JSON | None
) -> JSON | None:
    """The status message: its text, and a DataPart when the status carries data (a pending
    request: {"approvalRequest": {...}})."""
    if not text and not data:
        return None
    parts: list[JSON] = [{"text": text}] if text else []
    if data:
        parts.append(data_part(to_wire(data)))
    return {
        "messageId": f"{task_id}-status",
        "contextId": context_id,
        "taskId": task_id,
        "role": "ROLE_AGENT",
        "parts": parts,
    }


def plan_artifact(plan: JSON) -> JSON:
    return {
        "artifactId": "plan",
        "name": "plan",
        "description": PLAN_DESCRIPTION,
        "parts": [data_part({"plan": to_wire(plan)})],
    }


def report_artifact(report: JSON) -> JSON:
    # The result files are artifacts of their own; the report lists them without their bytes.
    outputs = [{k: v for k, v in o.items() if k != "inline"} for o in report.get("outputs") or []]
    shown = {**report, "outputs": outputs} if outputs else report
    return {
        "artifactId": "report",
        "name": "final-report",
        "description": REPORT_DESCRIPTION,
        "parts": [
            {"text": str(report.get("summary", ""))},
            data_part({"report": to_wire(shown)}),
        ],
    }


def output_artifact(output: JSON) -> JSON:
    """A result of the run: a file inline (small) or by URL (its owner's key fetches it), or
    the list of files changed."""
    name = str(output.get("name"))
    part: JSON
    if output.get("files") is not None:
        part = data_part(
            {"files": to_wire(output["files"]), "base": output.get("base"),
             "head": output.get("head")}
        )  # fmt: skip
    else:
        inline = output.get("inline")
        part = (
            {"raw": base64.b64encode(base64.b64decode(str(inline))).decode()}
            if inline is not None
            else {"url": str(output["url"])}
        )
        # Plain strings, not a oneof's: protobuf's printer leaves them out when empty.
        for key, field in (("filename", "filename"), ("mediaType", "media_type")):
            if text := str(output[field]):
                part[key] = text
    # Plain strings: protobuf's printer leaves them out when empty.
    artifact: JSON = {"artifactId": name, "name": name} if name else {}
    if description := OUTPUT_DESCRIPTIONS.get(name):
        artifact["description"] = description
    artifact["parts"] = [part]
    about = {k: output[k] for k in OUTPUT_ABOUT if output.get(k) is not None}
    if about:
        artifact["metadata"] = value(about)
    return artifact


def status_json(
    task_id: str,
    context_id: str,
    state: str,
    at: datetime | str,
    *,
    text: str | None,
    data: JSON | None = None,
) -> JSON:
    """A task's status (a task's own, or a status event's)."""
    status: JSON = {"state": STATE_NAMES[state]}
    message = status_message(task_id, context_id, text, data)
    if message is not None:
        status["message"] = message
    status["timestamp"] = timestamp_text(at)
    return status


def artifact_json(name: str | None, data: JSON) -> JSON:
    """An artifact event's artifact, by the name the run stored it under."""
    if name == "plan":
        return plan_artifact(data)
    if name == "report":
        return report_artifact(data)
    return output_artifact(data)


def task_json(row: TaskRow, history_length: int | None) -> JSON:
    """The Task of `row` as JSON, with at most `history_length` messages of its history."""
    status = status_json(
        row.task_id,
        row.context_id,
        row.state,
        row.status_at,
        text=row.status_text,
        data=row.status_data,
    )
    task: JSON = {"id": row.task_id, "contextId": row.context_id, "status": status}
    artifacts = []
    if row.plan is not None:
        artifacts.append(plan_artifact(row.plan))
    if row.report is not None:
        artifacts.append(report_artifact(row.report))
        artifacts.extend(output_artifact(o) for o in row.report.get("outputs") or [])
    if artifacts:
        task["artifacts"] = artifacts
    history = row.history
    if history_length is not None:
        history = history[-history_length:] if history_length > 0 else []
    if history:
        # As stored (jsonb's key order), with numbers as protobuf's Value prints them: jsonb
        # writes 1e300 as 301 digits, which a Value holds as a double.
        task["history"] = value(history)
    # The task's generation: the number of its last event, which a long poll waits past.
    task["metadata"] = value({**to_wire(row.metadata or {}), "generation": row.event_seq})
    return task
