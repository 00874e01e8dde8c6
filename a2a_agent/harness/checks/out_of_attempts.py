"""An item that used all its attempts, when the policy does not end the run: it asks a
person (a `repeated_failure` request, recorded with the failure in one step) or is skipped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a_agent.harness.kernel.effects import Concluded
from a2a_agent.harness.kernel.evidence import evidence, with_attempt
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.pauses import Pauses
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.records import Charge, ItemChange, ItemRow, StepRecord, StepView, Transition


def failed_check(
    view: StepView,
    item: ItemRow,
    attempt: int,
    value: JSON,
    shown: JSON,
    *,
    runs: int,
    outcome: str,
    status: str,
    reason: str,
    history_outcome: str | None = None,
    next_attempt: bool = False,
    more_transitions: Sequence[Transition] = (),
    **rest: Any,
) -> StepRecord:
    """The record of an item's verify that did not pass, whatever follows it (a retry, a
    skip, a person asked, the run failed): the item's change and its own transition; `rest`
    is the rest of the record (the task's state, the pause, the next effect)."""
    attempts = attempt + 1 if next_attempt else attempt
    return StepRecord(
        effect_key=effect_key(view.task_id, "verify", scope=item.item_id, attempt=attempt),
        step="verify",
        result={**value, "outcome": outcome},
        item=ItemChange(
            item_id=item.item_id,
            status=status,
            attempts=attempts,
            evidence=shown,
            failures=item.failures + 1,
            history=with_attempt(item, attempt, verify=shown, outcome=history_outcome or outcome),
        ),
        transitions=[
            Transition(
                item_id=item.item_id,
                attempt=attempts,
                from_state="verifying",
                to_state=status,
                reason=reason,
            ),
            *more_transitions,
        ],
        charge=Charge(kind="command"),
        runs=runs,
        **rest,
    )


def out_of_attempts(
    pauses: Pauses,
    view: StepView,
    item: ItemRow,
    attempt: int,
    value: JSON,
    *,
    runs: int,
    ask: bool,
) -> Concluded:
    """An item used all its attempts and the policy says ask (a repeated_failure pause)
    or skip it (the run goes on)."""
    result = CommandResult.from_json(value["command"])
    shown = evidence(result, runs)
    item_id, verify = item.item_id, item.verify_command
    failed = f"verification `{verify}` exited {result.exit_code}; no attempts left"
    if not ask:
        skipped = failed_check(
            view, item, attempt, value, shown, runs=runs, outcome="skipped", status="skipped",
            reason=f"{failed}; skipped (policy onItemFailure: skip)",
        )  # fmt: skip
        return Concluded(skipped, StepResult.ok(attempt=attempt))
    # Named by the attempt, which only grows: a person's `retry` grants one more attempt by
    # taking a failure back, so a count of failures would name the next ask as the last one
    # (already decided: no answer could reach it, and the run waited until canceled).
    request = pauses.request(
        view,
        pause_id=f"failure.{item_id}.{attempt}",
        kind="repeated_failure",
        summary=f"Item `{item_id}` ({item.title}) failed all {attempt} attempt(s): "
        f"`{verify}` exited {result.exit_code}. Retry once more (your note goes to the "
        "worker), skip it, or stop the run.",
        details={"item": item_id, "verify": shown},
        item_id=item_id,
        attempt=attempt,
    )
    asked = failed_check(
        view, item, attempt, value, shown, runs=runs, outcome="paused", status="failed",
        history_outcome="failed", reason=failed, more_transitions=[pauses.transition(request)],
        task_state="input_required", status_text=pauses.status_text(request), pause=request,
    )  # fmt: skip
    return Concluded(asked, StepResult("paused", attempt, {"pause": request.id}))
