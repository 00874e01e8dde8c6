"""Facts: what the run established, and checking them again before reversal stops being
possible.

An item may declare facts it establishes (`"facts": [{"key", "check", "maxAgeS"}]`): once it
is verified, each check runs and its output is the fact's value. The model records facts with
the `record_fact` tool. Before an irreversible action, every fact older than its maximum age
is checked again (`Effects.run`); a changed value, or a check that fails, pauses the run for a
person (`stale_fact`) with the old and new values.
"""

from __future__ import annotations

from a2a_agent.budget import Spend
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.fact_checks import as_fact, run_checks
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from persistence.records import StepRecord, Transition


class FactSteps:
    def __init__(self, ctx: StepContext, effects: Effects) -> None:
        self.ctx = ctx
        self.effects = effects

    async def establish(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        """The facts a verified item establishes, as a keyed effect (its checks run once)."""
        key = effect_key(task_id, "facts", scope=item_id, attempt=attempt)
        view = await self.ctx.view(task_id, key=key)
        item = view.item(item_id)
        effect = Effect(key, "facts", item_id, attempt, Spend(), integrity="none")

        async def perform() -> JSON:
            return {
                "checks": await run_checks(
                    self.ctx, task_id, item_id, attempt, key=key, checks=item.facts
                )
            }

        async def conclude(value: JSON, runs: int) -> Concluded:
            checks = value["checks"]
            facts = [as_fact(c, f"item {item_id}") for c in checks if c["exit_code"] == 0]
            transitions = [
                Transition(
                    item_id=item_id,
                    attempt=attempt,
                    from_state="done",
                    to_state="done",
                    reason=f"fact `{c['key']}` = {c['value'][:200]!r} (from `{c['check']}`)"
                    if c["exit_code"] == 0
                    else f"fact `{c['key']}` not established: `{c['check']}` exited "
                    f"{c['exit_code']}",
                )
                for c in checks
            ]
            record = StepRecord(
                effect_key=key,
                step="facts",
                result=value,
                facts=facts,
                transitions=transitions,
                runs=runs,
                item_id=item_id,
                attempt=attempt,
            )
            return Concluded(record, StepResult.ok(attempt=attempt), fingerprint=False)

        return await self.effects.run(view, effect, perform, conclude)
