"""The task's JSON view (`task_json`) against the Task the SDK's routes print (`to_task`,
then protobuf's printer): the same JSON for rows of every kind a run leaves. Pure functions
of a row, so no database: the rows are the shapes the store returns."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict

from a2a_agent.edge.convert import message_to_json, to_task
from a2a_agent.edge.task_view import STATES, reply_bytes, task_json
from persistence.records import TaskRow

FIRST = {
    "messageId": "m-1",
    "contextId": "c-1",
    "taskId": "t-1",
    "role": "ROLE_USER",
    "parts": [{"data": {"plan": {"goal": "g", "items": [{"id": "a", "maxAttempts": 2}]}}}],
}
LATER = [
    {"messageId": "m-2", "taskId": "t-1", "role": "ROLE_USER", "parts": [{"text": "yes"}],
     "metadata": {"decision": "approve", "weight": 0.5}},
    {"messageId": "m-3", "role": "ROLE_USER",
     "parts": [{"url": "https://x/files/1", "filename": "a.txt", "mediaType": "text/plain"}]},
]  # fmt: skip
# As jsonb gives a message back: 1e300 written as its 301 digits, keys in jsonb's order.
FROM_JSONB = {
    "role": "ROLE_USER",
    "parts": [{"text": "go"}],
    "metadata": {"big": 2**60, "huge": 10**300, "odd": 2**53 + 1, "ns": 1764914491806329000},
    "messageId": "m-4",
}
PLAN = {
    "goal": "ship it",
    "items_total": 2,
    "items_done": 1,
    "current_item": "b",
    "items": [
        {"id": "a", "title": "one", "status": "done", "attempts": {"1": 1}, "max_attempts": 3,
         "evidence": {"exit_code": 0, "duration_s": 1.25, "output_tail": "ok\n"},
         "history": [{"at": "x", "wall_s": 2.0}], "commit": "abc"},
        {"id": "b", "title": "two", "status": "in_progress", "attempts": {}, "max_attempts": 1,
         "evidence": None, "facts": [], "big": 2**60, "huge": 1e300, "neg": -3.0},
    ],
}  # fmt: skip
REPORT = {
    "summary": "did it",
    "items_done": 2,
    "outputs": [
        {"name": "diff", "inline": base64.b64encode(b"diff --git\n").decode(),
         "filename": "run.diff", "media_type": "text/x-diff", "size": 11, "sha256": "ab"},
        {"name": "bundle", "url": "https://x/files/2", "filename": "run.bundle",
         "media_type": "application/octet-stream", "size": 2048, "base": "b0", "head": "h1",
         "prerequisite": None},
        {"name": "files", "files": [{"path": "a", "size": 3}], "base": "b0", "head": "h1"},
        {"name": "empty", "inline": "", "filename": "", "media_type": "text/plain"},
    ],
}  # fmt: skip
METADATA = {
    "budget": {"max_usd": 1.0, "spent_usd": 0.125, "steps_without_progress": 0,
               "alerts": ["wall_s:80"], "dimension": "steps_without_progress"},
    "items_total": 2,
    "continued_by": ["t-2"],
}  # fmt: skip
APPROVAL = {"approval_request": {"item_id": "b", "expires_at": "2026-12-06T00:00:00Z",
                                 "max_attempts": 2.0, "fraction": 0.25}}  # fmt: skip


def _row(state: str, **changes: Any) -> TaskRow:
    fields: dict[str, Any] = {
        "task_id": "t-1",
        "owner": "",
        "context_id": "c-1",
        "state": state,
        "status_text": f"the task is {state}",
        "status_at": datetime(2026, 12, 5, 6, 1, 31, 806329, tzinfo=UTC),
        "history": [FIRST, *LATER],
        "metadata": METADATA,
        "plan": PLAN,
        "report": None,
        "event_seq": 7,
    }
    return TaskRow(**(fields | changes))


ROWS = [
    *[_row(state) for state in STATES],
    _row("submitted", plan=None, metadata={}, history=[FIRST], status_text="Accepted"),
    _row("input_required", status_data=APPROVAL, status_text=None),
    _row("input_required", status_data=APPROVAL),
    _row("working", status_text=None),
    _row("completed", report=REPORT),
    _row("failed", report={"summary": "", "outputs": []}, plan=None),
    _row("completed", status_at="2026-12-05T06:01:31Z", history=[]),
    _row("completed", status_at="2026-12-05T06:01:31.5+00:00"),
    _row("working", history=[FIRST, FROM_JSONB]),
    _row("completed", report={"summary": "s", "outputs": [
        {"name": "", "url": "https://x/files/3", "filename": "f", "media_type": "text/plain"}]}),
]  # fmt: skip


def _printed(row: TaskRow, history: int | None) -> Any:
    """What the SDK's routes write of the row's Task, read back as JSON."""
    return json.loads(json.dumps(MessageToDict(to_task(row, history))))


def _text(data: Any) -> str:
    """JSON text with keys in order: `2` and `2.0` differ here, as they do on the wire (a
    Struct's keys come out in an order of their own, which JSON does not care about)."""
    return json.dumps(data, sort_keys=True)


@pytest.mark.parametrize("history", [None, 0, 1, 2, 10])
@pytest.mark.parametrize("row", ROWS, ids=lambda row: f"{row.state}")
def test_the_view_is_the_json_of_the_task_the_sdk_prints(row: TaskRow, history: int | None) -> None:
    assert _text(task_json(row, history)) == _text(_printed(row, history))


def test_whole_numbers_print_whole_and_the_rest_as_doubles() -> None:
    item = task_json(_row("working"), None)["artifacts"][0]["parts"][0]["data"]["plan"]["items"][1]
    assert _text([item["maxAttempts"], item["neg"], item["huge"]]) == "[1, -3, 1e+300]"
    assert item["big"] == float(2**60) and isinstance(item["big"], float)


def test_history_messages_are_shown_as_the_intake_stored_them() -> None:
    stored = message_to_json(to_task(_row("submitted"), None).history[0])
    assert task_json(_row("submitted", history=[stored]), None)["history"] == [stored]


def test_a_send_reply_is_the_jsonrpc_result_holding_the_task() -> None:
    row = _row("submitted", history=[FIRST])
    sent = json.loads(reply_bytes("req-9", task_json(row, None)))
    expected = {"result": {"task": _printed(row, None)}, "id": "req-9", "jsonrpc": "2.0"}
    assert _text(sent) == _text(expected)
    assert list(sent) == ["result", "id", "jsonrpc"]
