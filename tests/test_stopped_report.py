"""A run a person's decision ended: the report (and so the MCP door's result, which is its
summary) says the item was refused and names the request, instead of calling the item
"interrupted (under way when the run ended)" as if the run had been cut off beside it."""

from __future__ import annotations

from datetime import UTC, datetime

from a2a_agent.harness.kernel.report import build_report, stopped_at
from a2a_agent.mcp_door.shapes import tool_result
from a2a_agent.wire import to_wire
from persistence.records import Decision, ItemRow, TaskRow


def row(item_id: str, status: str) -> ItemRow:
    return ItemRow(
        item_id=item_id, position=0, title=item_id, run="true", verify_command="true",
        verify_timeout_s=60, max_attempts=2, status=status, attempts=1, evidence=None,
        commit_sha=None, failures=0,
    )  # fmt: skip


REJECTED = Decision(
    id="irreversible.push",
    kind="irreversible_action",
    decision="reject",
    note="not now",
    how="reply",
    by="alice",
    item_id="push",
)


def test_an_item_a_person_rejected_is_said_refused_not_interrupted() -> None:
    items = [row("build", "done"), row("push", "interrupted"), row("later", "pending")]
    report = build_report(items, stopped=stopped_at(REJECTED))
    assert report["summary"] == (
        "1 of 3 items done and verified; refused by alice: push; not reached: later. "
        "The run stopped at request `irreversible.push` (irreversible action): reject by "
        "alice: not now."
    )
    assert report["items_interrupted"] == ["push"]  # its status, as the plan shows it
    assert to_wire(report)["stoppedAt"] == {
        "request": "irreversible.push",
        "kind": "irreversible_action",
        "item": "push",
        "decision": "reject",
        "by": "by alice",
        "note": "not now",
    }


def test_an_item_rejected_before_its_precheck_is_not_said_not_reached() -> None:
    expired = Decision(
        id="irreversible.push", kind="irreversible_action", decision="reject", note=None,
        how="expired", item_id="push",
    )  # fmt: skip
    summary = build_report([row("push", "pending")], stopped=stopped_at(expired))["summary"]
    assert summary.startswith("0 of 1 items done and verified; refused by default ")
    assert "not reached" not in summary


def test_the_mcp_result_says_what_the_report_says() -> None:
    report = build_report([row("push", "interrupted")], stopped=stopped_at(REJECTED))
    task = TaskRow(
        task_id="t", owner="o", context_id="c", state="failed",
        status_text="Failed: stopped at irreversible action `irreversible.push`: reject",
        status_at=datetime.now(UTC), history=[], metadata={}, plan=None, report=report,
        event_seq=1,
    )  # fmt: skip
    result = tool_result(task)
    text = result["content"][0]["text"]
    assert text == report["summary"] and "refused by alice: push" in text
    assert "interrupted" not in text and result["isError"] is True
    assert result["structuredContent"]["report"]["stoppedAt"]["decision"] == "reject"


def test_a_run_no_decision_ended_still_says_interrupted() -> None:
    summary = build_report([row("slow", "interrupted")])["summary"]
    assert (
        summary == "0 of 1 items done and verified; interrupted (under way when the run "
        "ended): slow."
    )
