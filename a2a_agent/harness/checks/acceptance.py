"""The plan's own check: a plan may carry `verify` at the top level (an end-to-end check:
the project builds and its tests pass). It runs after the last item, as a keyed, recorded,
sandboxed command; the task completes only if it passes. Its result is in
`metadata.acceptance` either way (and in the report), and a failure ends the run as failed
with the evidence.

Like an item's, the plan's check is run once before any work (`precheck_task`): one that
already passes cannot tell the goal met from not met. Policy `on_weak_check` says what
follows: `warn` records it and goes on, flagged in `metadata.acceptance.precheck`, the
report and progress.md; `ask` pauses for a person (a `weak_check` request, `weak_plan_check`:
approve goes on, flagged; reject fails the run before any work); `refuse` fails the run
before any work.
"""

from __future__ import annotations

import dataclasses

from a2a_agent.budget import Spend
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.evidence import STATUS_OUTPUT_CHARS, evidence, output_in_words
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.pauses import asked_here
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.records import Charge, StepRecord, StepView, Transition
from persistence.views import reopenings

SCOPE = "plan"
PRECHECK = "precheck"
# The pre-check's key names the acceptance check: `<task>:plan:0:precheck` is also the key
# of the pre-check of an item whose id is `plan`.
PRECHECK_STEP = "acceptance.precheck"
PAUSE_ID = "weak_plan_check"  # an item's is `weak.<item id>`, and `plan` may be an item's id


def work_begun(view: StepView) -> bool:
    """Whether any item has been worked or pre-checked: the workspace is no longer as the
    plan found it, so a check run on it now would say nothing about the check."""
    return any(i.status != "pending" or i.attempts or i.history for i in view.items)


class AcceptanceCheck:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings

    async def accept_task(self, task_id: str) -> StepResult:
        """The plan's check on the workspace as the items left it: once, and once more after
        every reopening (an item worked again changed it)."""
        view = await self.ctx.view(task_id)
        attempt = 1 + sum(reopenings(i) for i in view.items)
        key = effect_key(task_id, "acceptance", scope=SCOPE, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        acceptance = view.policy.get("acceptance")
        if not isinstance(acceptance, dict) or view.is_terminal:
            return StepResult.ok()
        command = str(acceptance["command"])
        timeout_s = int(acceptance.get("timeout_s") or 600)
        effect = Effect(
            key=key,
            step="acceptance",
            item_id=None,
            attempt=None,
            spend=Spend(),
            integrity="tree",
            action=command,
        )

        async def perform() -> JSON:
            result = await self.ctx.run_in_workspace(
                task_id, command, item_id=SCOPE, attempt=attempt, key=key, timeout_s=timeout_s
            )
            return {"command": result.as_json()}

        async def conclude(value: JSON, runs: int) -> Concluded:
            return await self._concluded(view, key, value, runs)

        return await self.effects.run(view, effect, perform, conclude)

    async def _concluded(self, view: StepView, key: str, value: JSON, runs: int) -> Concluded:
        result = CommandResult.from_json(value["command"])
        shown = {"result": "passed" if result.passed else "failed", **evidence(result, runs)}
        # metadata.acceptance is replaced whole: what the check did before the work stays.
        before = (view.policy.get("acceptance") or {}).get(PRECHECK)
        if isinstance(before, dict):
            shown[PRECHECK] = before
        if result.passed:
            # Kept with the check in the policy too: the report of whatever ending follows
            # (finished, a publish refused, a cancel) shows what metadata.acceptance does.
            checked = {k: v for k, v in shown.items() if k != PRECHECK}
            kept = {**(view.policy.get("acceptance") or {}), "checked": checked}
            record = StepRecord(
                effect_key=key,
                step="acceptance",
                result=value,
                metadata_patch={"acceptance": shown},
                policy_patch={"acceptance": kept},
                transitions=[
                    Transition(
                        to_state="working",
                        from_state="working",
                        reason=f"the plan's acceptance check `{result.command}` passed",
                    )
                ],
                charge=Charge(kind="command"),
                runs=runs,
            )
            return Concluded(record, StepResult.ok())
        said = (
            f"every item passed its check, but the plan's acceptance check `{result.command}` "
            f"exited {result.exit_code}"
        )
        record = StepRecord(
            effect_key=key,
            step="acceptance",
            result={**value, "outcome": "failed"},
            metadata_patch={"acceptance": shown},
            task_state="failed",
            status_text=f"Not completed: {said}. "
            f"{output_in_words(result.output_tail, chars=STATUS_OUTPUT_CHARS)}",
            transitions=[Transition(from_state="working", to_state="failed", reason=said)],
            report={**await self.endings.report(view), "acceptance": shown},
            charge=Charge(kind="command"),
            runs=runs,
        )
        record = await self.endings.closing_record(view, record, view.items)
        self.ctx.forget(view.task_id)
        return Concluded(record, StepResult("failed"))

    # ---- the plan's check before the work ---------------------------------------------------

    async def precheck_task(self, task_id: str) -> StepResult:
        """The plan's check on the workspace as it is before the first item: once per run."""
        key = effect_key(task_id, PRECHECK_STEP, scope=SCOPE, attempt=0)
        view = await self.ctx.view(task_id, key=key, budget=True)
        acceptance = view.policy.get("acceptance")
        if not isinstance(acceptance, dict) or view.is_terminal:
            return StepResult.ok()
        if PRECHECK in acceptance:
            return self._after_asking(view)
        if work_begun(view):
            return StepResult.ok()
        command = str(acceptance["command"])
        effect = Effect(
            key=key, step=PRECHECK, item_id=None, attempt=None, spend=Spend(),
            integrity="tree", action=command,
        )  # fmt: skip

        async def perform() -> JSON:
            result = await self.ctx.run_in_workspace(
                task_id,
                command,
                item_id=SCOPE,
                attempt=0,
                key=key,
                timeout_s=int(acceptance.get("timeout_s") or 600),
            )
            return {"command": result.as_json()}

        async def conclude(value: JSON, runs: int) -> Concluded:
            return await self._prechecked(view, acceptance, key, value, runs)

        return await self.effects.run(view, effect, perform, conclude)

    @staticmethod
    def _after_asking(view: StepView) -> StepResult:
        """The pre-check is recorded. If it asked a person (its effect's outcome says so; a
        run that warned before `ask` existed says nothing), the run goes on only once a
        person approved, in a later segment than the one that asked."""
        asked = view.effect is not None and (view.effect.result or {}).get("outcome") == "paused"
        if not asked:
            return StepResult.ok()
        decided = view.decisions.get(PAUSE_ID)
        if decided is None or asked_here(decided):
            return StepResult("paused")  # the step that asked, run again after a crash
        if decided.decision != "approve":
            return StepResult("failed")  # ended by `apply_decision` already
        return StepResult.ok()

    async def _prechecked(
        self, view: StepView, acceptance: JSON, key: str, value: JSON, runs: int
    ) -> Concluded:
        result = CommandResult.from_json(value["command"])
        weak = result.passed
        shown = {"result": "weak" if weak else "fails_before", **evidence(result, runs)}
        record = StepRecord(
            effect_key=key,
            step=PRECHECK,
            result=value,
            metadata_patch={"acceptance": {PRECHECK: shown}},
            policy_patch={"acceptance": {**acceptance, PRECHECK: shown}},
            charge=Charge(kind="command"),
            runs=runs,
        )
        if not weak:
            return Concluded(record, StepResult.ok())
        policy = str(view.policy.get("on_weak_check", "warn"))
        said = (
            f"weak check: the plan's acceptance check `{result.command}` already passes before "
            "any work (exit 0), so it cannot tell the goal met from not met"
        )
        if policy == "ask":
            request = self.effects.pauses.request(
                view,
                pause_id=PAUSE_ID,
                kind="weak_check",
                options_of="weak_plan_check",
                summary=f"The plan's acceptance check `{result.command}` already passes before "
                "any work, so it cannot tell the goal met from not met. Approve to go on with "
                "it as it is (flagged), or reject (the run fails before any work).",
                details={"acceptance": result.command, PRECHECK: shown},
            )
            record = dataclasses.replace(
                record,
                result={**value, "outcome": "paused"},
                task_state="input_required",
                status_text=self.effects.pauses.status_text(request),
                transitions=[self.effects.pauses.transition(request)],
                pause=request,
            )
            return Concluded(record, StepResult("paused", 0, {"pause": request.id}))
        if policy != "refuse":
            note = Transition(
                to_state="working",
                from_state="working",
                reason=f"{said} (policy onWeakCheck: {policy}; the run goes on, flagged)",
            )
            return Concluded(dataclasses.replace(record, transitions=[note]), StepResult.ok())
        record = dataclasses.replace(
            record,
            result={**value, "outcome": "failed"},
            task_state="failed",
            status_text=f"Not started: {said} (policy onWeakCheck: refuse). Write a plan "
            "check that fails until the goal is met.",
            transitions=[
                Transition(from_state="working", to_state="failed", reason=f"{said}; refused")
            ],
            report={**await self.endings.report(view), "acceptance": {PRECHECK: shown}},
        )
        record = await self.endings.closing_record(view, record, view.items)
        self.ctx.forget(view.task_id)
        return Concluded(record, StepResult("failed"))
