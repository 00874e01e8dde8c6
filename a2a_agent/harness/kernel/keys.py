"""Idempotency keys: one function builds every key, for every kind of effect and step.

A key is a pure function of the run's position (task, scope, attempt, step), never of the
process, the clock or chance, so a step re-run after a crash, in any process on any machine,
presents the key it had before; commands see it as A2A_IDEMPOTENCY_KEY.

    <task>:<item>:<attempt>:<step>   an item's step: begin, run, verify, restore, end_turn,
                                     model.<turn>, tool.<turn>.<n>, compact.<turn>,
                                     precheck (attempt 0), reverify.<checkpoint>,
                                     probe.<commit> (a bisect's run of its check)
    <task>:plan:<try>:<step>         planning: model, accept, plancheck; acceptance
    <task>:task:<step>               the run as a whole: begin, finish, fail, budget_stop,
                                     reverify.s<segment>.<n> (a round's outcome)
"""

from __future__ import annotations

TASK_SCOPE = "task"
PLAN_SCOPE = "plan"


def effect_key(
    task_id: str, step: str, *, scope: str = TASK_SCOPE, attempt: int | None = None
) -> str:
    """The key of `step` in `scope` (an item id, PLAN_SCOPE or TASK_SCOPE) at `attempt`."""
    if attempt is None:
        return f"{task_id}:{scope}:{step}"
    return f"{task_id}:{scope}:{attempt}:{step}"
