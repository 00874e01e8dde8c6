"""An item that used all its attempts, when the policy does not end the run: it asks a
person (a `repeated_failure` request, recorded with the failure in one step) or is skipped."""

from __future__ import annotations

from a2a_agent.harness.kernel.effects import Concluded
from a2a_agent.harness.kernel.evidence import evidence, with_attempt
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.pauses import Pauses
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.records import Charge, ItemChange, ItemRow, StepRecord, StepView, Transition


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
    failures = item.failures + 1
    item_id, verify = item.item_id, item.verify_command
    key = effect_key(view.task_id, "verify", scope=item_id, attempt=attempt)
    failed = f"verification `{verify}` exited {result.exit_code}; no attempts left"
    if not ask:
        history = with_attempt(item, attempt, verify=shown, outcome="skipped")
        record = StepRecord(
            effect_key=key,
            step="verify",
            result={**value, "outcome": "skipped"},
            item=ItemChange(
                item_id=item_id,
                status="skipped",
                attempts=attempt,
                evidence=shown,
                failures=failures,
                history=history,
            ),
            transitions=[
                Transition(
                    item_id=item_id,
                    attempt=attempt,
                    from_state="verifying",
                    to_state="skipped",
                    reason=f"{failed}; skipped (policy onItemFailure: skip)",
                )
            ],
            charge=Charge(kind="command"),
            runs=runs,
        )
        return Concluded(record, StepResult.ok(attempt=attempt))
    request = pauses.request(
        view,
        pause_id=f"failure.{item_id}.{failures}",
        kind="repeated_failure",
        summary=f"Item `{item_id}` ({item.title}) failed all {failures} attempt(s): "
        f"`{verify}` exited {result.exit_code}. Retry once more (your note goes to the "
        "worker), skip it, or stop the run.",
        details={"item": item_id, "verify": shown},
        item_id=item_id,
        attempt=attempt,
    )
    history = with_attempt(item, attempt, verify=shown, outcome="failed")
    record = StepRecord(
        effect_key=key,
        step="verify",
        result={**value, "outcome": "paused"},
        item=ItemChange(
            item_id=item_id,
            status="failed",
            attempts=attempt,
            evidence=shown,
            failures=failures,
            history=history,
        ),
        task_state="input_required",
        status_text=pauses.status_text(request),
        transitions=[
            Transition(
                item_id=item_id,
                attempt=attempt,
                from_state="verifying",
                to_state="failed",
                reason=failed,
            ),
            pauses.transition(request),
        ],
        charge=Charge(kind="command"),
        runs=runs,
        pause=request,
    )
    return Concluded(record, StepResult("paused", attempt, {"pause": request.id}))
