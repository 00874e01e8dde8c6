"""How a run ends, all in one place: finished, failed, stopped by its budget.

Each ending writes the final state, its reason as the last progress entry, and the final
report, in one recorded step keyed by the ending, so an ending re-run after a crash is
recorded once.
"""

from __future__ import annotations

from a2a_agent.budget import Exhausted
from a2a_agent.harness.context import StepContext
from a2a_agent.harness.keys import effect_key
from a2a_agent.harness.report import build_report
from a2a_agent.harness.results import JSON, StepResult
from persistence.records import StepRecord, StepView, Transition


class RunEndings:
    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    async def report(self, view: StepView) -> JSON:
        """The final report from the stored items, the commits and the budget ledger."""
        return build_report(
            view.items,
            await self.ctx.workspace(view.task_id).files_changed_since_start(),
            await self.ctx.guard.budgets.budget_status(view.task_id),
        )

    async def _end(
        self,
        view: StepView,
        *,
        step: str,
        state: str,
        text: str,
        reason: str,
        metadata_patch: JSON | None = None,
    ) -> str:
        outcome = await self.ctx.record(
            view,
            StepRecord(
                effect_key=effect_key(view.task_id, step),
                step=step,
                result={},
                task_state=state,
                status_text=text,
                transitions=[Transition(to_state=state, reason=reason)],
                report=await self.report(view),
                metadata_patch=metadata_patch,
            ),
        )
        self.ctx.forget(view.task_id)
        return outcome.task_state

    async def finish(self, view: StepView) -> StepResult:
        summary = build_report(view.items)["summary"]
        state = await self._end(
            view, step="finish", state="completed", text=f"Completed: {summary}", reason=summary
        )
        return StepResult.ok({"state": state})

    async def fail(self, view: StepView, reason: str) -> StepResult:
        """End the run as failed when it cannot go on (its reason goes to the caller)."""
        state = await self._end(
            view, step="fail", state="failed", text=f"Failed: {reason}", reason=reason
        )
        return StepResult.ok({"state": state})

    async def budget_stop(self, view: StepView, spent: Exhausted) -> StepResult:
        """A clean stop: the plan stays as it is, a final entry says where and why."""
        await self._end(
            view,
            step="budget_stop",
            state="failed",
            text=f"Stopped: {spent.reason}",
            reason=f"stopped: {spent.reason}",
            metadata_patch={
                "failure": {
                    "reason": "budget_exhausted",
                    "dimension": spent.dimension,
                    "used": spent.used,
                    "limit": spent.limit,
                }
            },
        )
        return StepResult("stopped")
