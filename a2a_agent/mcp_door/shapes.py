"""An A2A task as an MCP task (`io.modelcontextprotocol/tasks`, MCP 2026-07-28): the same row,
seen through the other protocol. The states map one to one: submitted and working are
`working`; input-required is `input_required`, its pending request an elicitation in
`inputRequests` (keyed by the request's id, which a reply uses once); completed is
`completed` with the report as the tool's result; failed and rejected are `completed` with
`isError` (the tool ran and says why it did not succeed; MCP's `failed` is for protocol
errors); canceled is `cancelled`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from a2a_agent.edge.answers import pending_request
from a2a_agent.wire import to_wire
from persistence.records import JSON, TaskRow

POLL_INTERVAL_MS = 2000
MCP_STATUS = {
    "submitted": "working",
    "working": "working",
    "input_required": "input_required",
    "completed": "completed",
    "failed": "completed",
    "rejected": "completed",
    "canceled": "cancelled",
}
ELICIT = "elicitation/create"


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def task_fields(row: TaskRow, created_at: datetime) -> JSON:
    """The Task object of the MCP tasks extension for `row` (without its details): created
    when it was submitted (`tasks.created_at`, which the row does not carry), last updated
    at its last change (the status's time)."""
    fields: JSON = {
        "taskId": row.task_id,
        "status": MCP_STATUS[row.state],
        "createdAt": _iso(created_at),
        "lastUpdatedAt": _iso(row.status_at),
        "ttlMs": None,  # kept until the service's retention removes the task
        "pollIntervalMs": POLL_INTERVAL_MS,
    }
    message = status_message(row)
    if message:
        fields["statusMessage"] = message
    return fields


def status_message(row: TaskRow) -> str | None:
    """What the task says of itself: for a task that waits, what it asks and how an MCP
    client answers (the A2A status text says how to reply in A2A)."""
    request = pending_request(row.status_data) if row.state == "input_required" else None
    if request is None:
        return row.status_text or None
    asked = request.get("summary") or request.get("question") or "The task asks you."
    return (
        f"Waiting for you: {asked} Answer request `{request.get('id')}` (its form, or answer_task)."
    )


def detailed_task(row: TaskRow, created_at: datetime) -> JSON:
    """`tasks/get`'s answer: the Task, with its pending requests, or its result."""
    fields = task_fields(row, created_at)
    request = pending_request(row.status_data) if row.state == "input_required" else None
    if request is not None:
        fields["inputRequests"] = {str(request["id"]): elicitation(request)}
    elif fields["status"] == "completed":
        fields["result"] = tool_result(row)
    return fields


def elicitation(request: JSON) -> JSON:
    """A pending request as a form the person behind the MCP client fills in: the decision
    (one of the request's options) and a note."""
    options = [str(o) for o in request.get("options") or []]
    decision: JSON = {"type": "string", "title": "Decision", "description": "What to do"}
    if options and request.get("kind") != "question":
        decision["enum"] = options
    message = str(request.get("summary") or request.get("question") or "The task asks you.")
    return {
        "method": ELICIT,
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "decision": decision,
                    "note": {"type": "string", "title": "Note", "description": "Why, or what"},
                },
                "required": ["decision"],
            },
        },
    }


def tool_result(row: TaskRow) -> JSON:
    """The result of the tool call that made the task: the report's summary as text and the
    report itself as structured content; an error result unless the task completed."""
    report = row.report or {}
    text = str(report.get("summary") or row.status_text or f"The task is {row.state}.")
    outputs = [{k: v for k, v in o.items() if k != "inline"} for o in report.get("outputs") or []]
    shown: JSON = {**report, "outputs": outputs} if outputs else dict(report)
    structured: dict[str, Any] = {"taskId": row.task_id, "state": row.state}
    if shown:
        structured["report"] = to_wire(shown)
    return {
        "resultType": "complete",
        "content": [{"type": "text", "text": text}],
        "structuredContent": structured,
        "isError": row.state != "completed",
    }


def submitted_text(row: TaskRow) -> str:
    """What a client without the tasks extension is told when its task is made."""
    return (
        f"Task {row.task_id} is {row.state}: it runs in the background. Look at it with "
        f"get_task (task_id {row.task_id!r}); when it asks, answer with answer_task; stop it "
        "with cancel_task."
    )


def ended_text(row: TaskRow) -> str:
    """Why a cancel of a task that had already ended changed nothing."""
    return (
        f"task {row.task_id} had already ended ({row.state}) before this cancel; nothing was "
        f"canceled. get_task (task_id {row.task_id!r}) gives its result."
    )


def refused_text(row: TaskRow) -> str | None:
    """Why a task ended as it was made (a goal on a server without a model, say): the
    caller is told that, as the tool's error, not that it runs in the background."""
    if row.state not in ("rejected", "failed", "canceled"):
        return None
    return f"Task {row.task_id} is {row.state}: {row.status_text or 'it cannot run'}"
