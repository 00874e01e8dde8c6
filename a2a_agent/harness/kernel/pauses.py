"""Pauses: where a run stops for a person, and what it does with the answer.

A pause is a recorded step like any other: it writes the request (a row in `pauses`) and
moves the task to input-required in one transaction, and the workflow segment ends there;
nothing waits in this process. The reply (the edge) records the decision and starts the next
segment, whose first step applies it (`apply_decision`). The step that paused then runs
again under its own key and finds the decision in its view, so nothing is done twice.

Where a run pauses (`kind`):
    irreversible_action  before the effects of an item marked irreversible, and before a
                         command the server's patterns call irreversible (git push, rm -rf..)
    budget_threshold     before spending past the pause point, when the policy asks for it
    repeated_failure     an item used all its attempts (policy on_item_failure: ask)
    plan_review          a drafted plan, before any work (policy review_plan)
    question             a plan item that asks a person (`ask`)
    stale_fact           before an irreversible action, a fact checked again has changed
    weak_check           an item's check, or the plan's own, passes before any work (policy
                         on_weak_check: ask)
    regression           a done item's check fails when run again after later items
                         (policy on_regression: ask)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass

from a2a_agent.budget import crossings
from a2a_agent.harness.kernel.context import StepContext, ended_by_others
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import StepResult
from persistence.records import Decision, PauseRequest, StepRecord, StepView, Transition

# What each kind offers; the first option goes on, the default on expiry is `reject`-like.
OPTIONS: dict[str, list[str]] = {
    "irreversible_action": ["approve", "skip", "reject"],
    "command": ["approve", "reject"],
    "budget_threshold": ["approve", "reject"],
    "repeated_failure": ["retry", "skip", "stop"],
    "plan_review": ["approve", "reject"],
    "question": ["answer", "reject"],
    "stale_fact": ["approve", "reject"],
    "plan_change": ["approve", "reject"],
    "weak_check": ["approve", "skip", "reject"],
    "weak_plan_check": ["approve", "reject"],  # the plan's own check: nothing to skip
    "regression": ["reopen", "skip", "reject"],
}
GOING_ON = frozenset({"approve", "retry", "answer"})


@dataclass(frozen=True)
class PauseConfig:
    expires_s: float  # how long a request waits before its default applies
    irreversible: Sequence[re.Pattern[str]]
    pause_pct: int  # the budget's pause point


def compile_patterns(patterns: Sequence[str]) -> list[re.Pattern[str]]:
    return [re.compile(p) for p in patterns if p.strip()]


def expiry_default(kind: str, policy_on_expiry: str | None) -> str:
    options = OPTIONS[kind]
    if policy_on_expiry == "approve":
        return options[0]
    return options[-1]


class Pauses:
    def __init__(self, ctx: StepContext, config: PauseConfig) -> None:
        self.ctx = ctx
        self.config = config

    def request(
        self,
        view: StepView,
        *,
        pause_id: str,
        kind: str,
        summary: str,
        details: dict[str, object] | None = None,
        item_id: str | None = None,
        attempt: int | None = None,
        options_of: str | None = None,
    ) -> PauseRequest:
        options = OPTIONS[options_of or kind]
        expires = view.policy.get("approval_expires_s") or self.config.expires_s
        return PauseRequest(
            id=pause_id,
            kind=kind,
            summary=summary,
            options=list(options),
            on_expiry=expiry_default(options_of or kind, view.policy.get("on_expiry")),
            expires_s=float(expires),
            details=dict(details or {}),
            item_id=item_id,
            attempt=attempt,
        )

    @staticmethod
    def status_text(request: PauseRequest) -> str:
        options = " | ".join(request.options)
        return (
            f"Waiting for a person: {request.summary} Reply with one of: {options} "
            f'(a DataPart {{"approval": {{"id": "{request.id}", "decision": ..., "note": ...}}}}'
            ", or a text starting with the decision)."
        )

    @staticmethod
    def transition(request: PauseRequest) -> Transition:
        return Transition(
            to_state="input_required",
            from_state="working",
            reason=f"asks ({request.kind.replace('_', ' ')} `{request.id}`): "
            f"{request.summary} [{' | '.join(request.options)}]",
        )

    async def ask(self, view: StepView, request: PauseRequest, attempt: int = 0) -> StepResult:
        """Record the request and end the segment: the task is input-required."""
        record = StepRecord(
            effect_key=effect_key(view.task_id, f"pause.{request.id}"),
            step="pause",
            result={"pause": request.id},
            task_state="input_required",
            status_text=self.status_text(request),
            transitions=[self.transition(request)],
            pause=request,
        )
        outcome = await self.ctx.record(view, record, fingerprint=False)
        if ended_by_others(record, outcome):
            return StepResult("stopped", attempt)
        return StepResult("paused", attempt, {"pause": request.id})

    # ---- before an effect ------------------------------------------------------------------

    def before_effect(
        self,
        view: StepView,
        *,
        key: str,
        item_id: str | None,
        attempt: int | None,
        action: str | None,
        spends: bool,
    ) -> PauseRequest | None:
        """The request that must be decided before this effect runs, if any (decided or not:
        the caller looks the decision up)."""
        if item_id is not None:
            item = view.item(item_id)
            if item.irreversible:
                return self.request(
                    view,
                    pause_id=f"irreversible.{item_id}",
                    kind="irreversible_action",
                    summary=f"Item `{item_id}` ({item.title}) is marked irreversible; "
                    "approve before it runs, skip it, or reject (the run stops).",
                    details={"item": item_id, "run": item.run, "verify": item.verify_command},
                    item_id=item_id,
                    attempt=attempt,
                )
        if action is not None:
            for pattern in self.config.irreversible:
                if pattern.search(action):
                    step = key.rsplit(":", 1)[-1]
                    scope = f"{item_id}.{attempt}.{step}" if item_id else step
                    return self.request(
                        view,
                        pause_id=f"command.{scope}",
                        kind="irreversible_action",
                        options_of="command",
                        summary=f"The command `{action[:300]}` matches the irreversible "
                        f"pattern `{pattern.pattern}`; approve before it runs.",
                        details={"command": action, "pattern": pattern.pattern, "key": key},
                        item_id=item_id,
                        attempt=attempt,
                    )
        if spends and view.policy.get("budget_pause") and view.budget:
            for crossing in crossings(view.budget, self.config.pause_pct):
                if crossing.threshold != self.config.pause_pct:
                    continue
                if crossing.dimension not in ("usd", "tokens", "actions"):
                    continue
                return self.request(
                    view,
                    pause_id=f"budget.{crossing.dimension}.{crossing.limit:g}",
                    kind="budget_threshold",
                    summary=f"{self.config.pause_pct}% of the {crossing.dimension} budget is "
                    f"used ({crossing.used:g} of {crossing.limit:g}); approve to go on (a "
                    'reply may raise the limit: "budget": {...}), or reject to stop here.',
                    details={
                        "dimension": crossing.dimension,
                        "used": crossing.used,
                        "limit": crossing.limit,
                    },
                    item_id=item_id,
                    attempt=attempt,
                )
        return None


def decided_to_go_on(decision: Decision) -> bool:
    return decision.decision in GOING_ON


# The workflow segment the running step belongs to, when the engine says (None: unknown).
RUNNING_SEGMENT: ContextVar[int | None] = ContextVar("running_segment", default=None)


def asked_here(decision: Decision) -> bool:
    """The decision answers a request this very segment made: a step of it that runs again
    (recovered after a crash) must not act on the answer, the segment the reply started
    does. Such a step ends its segment as the pause did."""
    running = RUNNING_SEGMENT.get()
    return running is not None and decision.segment >= running
