"""An item's attempt as the records every room writes: the time an attempt has left
(`within_item`), its work ending and its verification coming next (`to_verification`,
`verify_start`). The item's `run` command, the model's turn and a delegate's report all end
an attempt the same way, so these live here rather than in any one of them.
"""

from __future__ import annotations

import math

from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON
from persistence.records import (
    Charge,
    EffectStart,
    ItemChange,
    ItemRow,
    StepRecord,
    Transition,
)


def within_item(item: ItemRow, timeout_s: int) -> int | None:
    """`timeout_s`, cut to what the item's own time limit leaves; None if nothing is left."""
    left = item.time_left_s()
    if left is None:
        return timeout_s
    if left <= 0:
        return None
    return max(1, min(timeout_s, math.ceil(left)))


def verify_start(task_id: str, item_id: str, attempt: int) -> EffectStart:
    key = effect_key(task_id, "verify", scope=item_id, attempt=attempt)
    return EffectStart(key=key, step="verify", item_id=item_id, attempt=attempt)


def to_verification(
    task_id: str,
    item: ItemRow,
    attempt: int,
    *,
    step: str,
    done: str,
    result: JSON | None = None,
    charge: Charge | None = None,
    runs: int = 1,
    history: list[JSON] | None = None,
) -> StepRecord:
    """The record of an item's work ending (its `run` command, or the model's turn): the item
    goes to `verifying`, and its verification is marked as the effect that comes next."""
    return StepRecord(
        effect_key=effect_key(task_id, step, scope=item.item_id, attempt=attempt),
        step=step,
        result=result or {},
        item=ItemChange(
            item_id=item.item_id, status="verifying", attempts=attempt, history=history
        ),
        transitions=[
            Transition(
                item_id=item.item_id,
                attempt=attempt,
                from_state="in_progress",
                to_state="verifying",
                reason=f"{done}; verifying with `{item.verify_command}`",
            )
        ],
        charge=charge,
        runs=runs,
        then=verify_start(task_id, item.item_id, attempt),
    )
