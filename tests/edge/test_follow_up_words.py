"""What a message to a task that ended is told: how to start anew and, when the task can be
taken up again, how to continue it ({"continue": true}), which the refusal did not say."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from a2a_agent.edge.follow_ups import no_more_messages
from a2a_agent.edge.handler import _cannot_continue
from persistence.records import JSON, TaskRow
from persistence.tasks import CannotContinue

PLAN: JSON = {"goal": "g", "items": [{"id": "a", "status": "failed"}]}


def ended(state: str, plan: JSON | None = PLAN) -> TaskRow:
    return TaskRow(
        task_id="t1", owner="o", context_id="c", state=state, status_text=None,
        status_at=datetime.now(UTC), history=[], metadata={}, plan=plan, report=None,
        event_seq=1,
    )  # fmt: skip


@pytest.mark.parametrize("state", ["completed", "failed", "canceled"])
def test_an_ended_task_with_a_plan_says_how_to_continue_it(state: str) -> None:
    said = no_more_messages(ended(state))
    assert said.startswith(f"task t1 is {state} and takes no more messages; send a new message")
    assert 'a DataPart {"continue": true} and referenceTaskIds ["t1"]' in said


@pytest.mark.parametrize(
    ("state", "plan"), [("rejected", PLAN), ("failed", None), ("failed", {"items": []})]
)
def test_a_task_with_nothing_to_continue_does_not_offer_it(state: str, plan: JSON | None) -> None:
    said = no_more_messages(ended(state, plan))
    assert said.endswith("send a new message without taskId to start a new task")
    assert "continue" not in said


def test_continuing_a_rejected_task_is_not_told_to_wait_for_it() -> None:
    said = _cannot_continue(CannotContinue("t1", "not_ended", "rejected"))
    assert said.startswith("task t1 was rejected before any work: it has no plan to continue")
    assert "wait for it" not in _cannot_continue(CannotContinue("t1", "not_ended", "rejected"))
    assert "wait for it" in _cannot_continue(CannotContinue("t1", "not_ended", "working"))
