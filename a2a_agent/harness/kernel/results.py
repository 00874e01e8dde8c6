"""The typed result every step returns, and that the workflow body decides from.

It crosses the engine's checkpoint as JSON (`as_json` / `from_json`), so a replayed step
hands the body the same value it had the first time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

JSON = dict[str, Any]

# ok       the step did what it does; the body goes on
# stopped  the run ended (cancel, budget stop, a failure recorded elsewhere): stop here
# restart  the workspace was restored: work the item again as `attempt`
# retry    verification failed with attempts left: work the item again as `attempt`
# done     verification passed: the item is done
# failed   verification failed with no attempts left: the run has ended as failed
# paused   the run asked a person and waits (a row): this workflow segment ends here
Outcome = Literal["ok", "stopped", "restart", "retry", "done", "failed", "paused"]
OUTCOMES: frozenset[str] = frozenset(get_args(Outcome))


@dataclass(frozen=True)
class StepResult:
    outcome: Outcome
    attempt: int = 0
    payload: JSON = field(default_factory=dict)

    @classmethod
    def ok(cls, payload: JSON | None = None, *, attempt: int = 0) -> StepResult:
        return cls("ok", attempt, payload or {})

    def as_json(self) -> JSON:
        return {"outcome": self.outcome, "attempt": self.attempt, "payload": self.payload}

    @classmethod
    def from_json(cls, data: JSON) -> StepResult:
        outcome = data["outcome"]
        if outcome not in OUTCOMES:
            raise ValueError(f"not a step outcome: {outcome!r}")
        return cls(outcome=outcome, attempt=int(data["attempt"]), payload=dict(data["payload"]))
