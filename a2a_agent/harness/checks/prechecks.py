"""Checks that can fail: before an item's first attempt its verify command runs against the
workspace as it is. A check that already passes cannot tell done from not done (`test -d .`,
`true`, a grep for what the repository already holds); the plan's policy `on_weak_check`
says what follows: `warn` (record it, flagged, and go on), `ask` (a `weak_check` request),
or `refuse` (the item fails with the evidence, and the run with it). An item may opt out
(`"precheck": false`), and its record says so. A plan the model drafts is checked the same
way before it is accepted, its own top-level `verify` too (`weak_in_plan`): a check that
already passes goes back to the model as a planning error.

The pre-check is a keyed, recorded step like any other: in the sandbox, charged as a
command, and never run twice for one item. Its result is the item's attempt 0 in the
history: `{"attempt": 0, "precheck": {"result": "fails_before" | "weak" | "skipped", ...}}`.
"""

from __future__ import annotations

from a2a_agent.budget import Spend
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.evidence import evidence, with_attempt
from a2a_agent.harness.kernel.keys import PLAN_SCOPE, effect_key
from a2a_agent.harness.kernel.pauses import asked_here
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.records import (
    Charge,
    ItemChange,
    ItemRow,
    NewItem,
    StepRecord,
    StepView,
    Transition,
)

PRECHECK = "precheck"


def precheck_of(item: ItemRow) -> JSON | None:
    """The item's pre-check record, if it has one."""
    for entry in item.history:
        if entry.get("attempt") == 0 and isinstance(entry.get(PRECHECK), dict):
            return dict(entry[PRECHECK])
    return None


def needs_precheck(item: ItemRow) -> bool:
    return item.status == "pending" and item.attempts == 0 and precheck_of(item) is None


WEAK_PLAN_CHECK = (
    "item {item}: its check `{command}` already passes before any work, so it cannot tell "
    "done from not done; write one that fails until the item is done"
)
WEAK_ACCEPTANCE = (
    "the plan's own check (`verify`) `{command}` already passes before any work, so it cannot "
    "tell the goal met from not met; write one that fails until the goal is met"
)


def weak_pause_id(item_id: str) -> str:
    """The request an item's weak pre-check makes under `onWeakCheck: ask`."""
    return f"weak.{item_id}"


def skipped_because(item: ItemRow) -> str:
    """Why an item has no pre-check to run, as its record says."""
    return "the item opted out" if not item.precheck else "a person's answer is the work"


class PreChecks:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings

    async def precheck_item(self, task_id: str, item_id: str) -> StepResult:
        key = effect_key(task_id, PRECHECK, scope=item_id, attempt=0)
        view = await self.ctx.view(task_id, key=key, budget=True)
        item = view.item(item_id)
        if not needs_precheck(item):
            if self._still_asking(view, item_id):
                # This step asked and was recorded, then its segment's process died before
                # the step's result was kept: it runs again, and still waits for the answer.
                return StepResult("paused", 0, {"pause": weak_pause_id(item_id)})
            return StepResult.ok()
        if not item.precheck or item.ask:
            return await self._record_skipped(view, item, key, skipped_because(item))
        effect = Effect(
            key=key,
            step=PRECHECK,
            item_id=item_id,
            attempt=0,
            spend=Spend(),
            integrity="tree",
            action=item.verify_command,
        )

        async def perform() -> JSON:
            result = await self.ctx.run_in_workspace(
                task_id,
                item.verify_command,
                item_id=item_id,
                attempt=0,
                key=key,
                timeout_s=item.verify_timeout_s,
            )
            return {"command": result.as_json()}

        async def conclude(value: JSON, runs: int) -> Concluded:
            return await self._concluded(view, item, key, value, runs)

        return await self.effects.run(view, effect, perform, conclude)

    @staticmethod
    def _still_asking(view: StepView, item_id: str) -> bool:
        """Whether the item's pre-check asked (`onWeakCheck: ask`) and no answer lets this
        segment go on: none yet, or one this very segment must leave to the next."""
        recorded = view.effect
        if recorded is None or (recorded.result or {}).get("outcome") != "paused":
            return False
        decided = view.decisions.get(weak_pause_id(item_id))
        return decided is None or asked_here(decided)

    async def _record_skipped(
        self, view: StepView, item: ItemRow, key: str, why: str
    ) -> StepResult:
        record = StepRecord(
            effect_key=key,
            step=PRECHECK,
            result={"outcome": "skipped"},
            item=ItemChange(
                item_id=item.item_id,
                status=item.status,
                attempts=0,
                history=with_attempt(item, 0, precheck={"result": "skipped", "why": why}),
            ),
        )
        return await self.ctx.advance(view, record, 0)

    async def _concluded(
        self, view: StepView, item: ItemRow, key: str, value: JSON, runs: int
    ) -> Concluded:
        result = CommandResult.from_json(value["command"])
        verify, item_id = item.verify_command, item.item_id
        weak = result.passed
        shown = {
            "result": "weak" if weak else "fails_before",
            **evidence(result, runs),
        }
        history = with_attempt(item, 0, precheck=shown)
        policy = str(view.policy.get("on_weak_check", "warn"))
        change = ItemChange(item_id=item_id, status=item.status, attempts=0, history=history)
        if not weak:
            record = StepRecord(
                effect_key=key, step=PRECHECK, result=value, item=change, runs=runs,
                charge=Charge(kind="command"),
            )  # fmt: skip
            return Concluded(record, StepResult.ok())
        said = (
            f"weak check: `{verify}` already passes before the work (exit 0), so it cannot "
            "tell done from not done"
        )
        if policy == "refuse":
            return await self._refused(
                view, item, key, value, runs=runs, history=history, said=said
            )
        if policy == "ask":
            request = self.effects.pauses.request(
                view,
                pause_id=weak_pause_id(item_id),
                kind="weak_check",
                summary=f"Item `{item_id}` ({item.title}): its check `{verify}` already "
                "passes before any work. Approve to go on with it as it is, skip the item, "
                "or reject to stop the run.",
                details={"item": item_id, "precheck": shown},
                item_id=item_id,
                attempt=0,
            )
            record = StepRecord(
                effect_key=key,
                step=PRECHECK,
                result={**value, "outcome": "paused"},
                item=change,
                task_state="input_required",
                status_text=self.effects.pauses.status_text(request),
                transitions=[self.effects.pauses.transition(request)],
                charge=Charge(kind="command"),
                runs=runs,
                pause=request,
            )
            return Concluded(record, StepResult("paused", 0, {"pause": request.id}))
        record = StepRecord(
            effect_key=key,
            step=PRECHECK,
            result=value,
            item=change,
            transitions=[
                Transition(
                    item_id=item_id,
                    attempt=0,
                    from_state=item.status,
                    to_state=item.status,
                    reason=f"{said} (policy onWeakCheck: warn; the item goes on, flagged)",
                )
            ],
            charge=Charge(kind="command"),
            runs=runs,
        )
        return Concluded(record, StepResult.ok())

    async def _refused(
        self,
        view: StepView,
        item: ItemRow,
        key: str,
        value: JSON,
        *,
        runs: int,
        history: list[JSON],
        said: str,
    ) -> Concluded:
        item_id = item.item_id
        shown = history[-1][PRECHECK] if history else None
        record = StepRecord(
            effect_key=key,
            step=PRECHECK,
            result={**value, "outcome": "failed"},
            item=ItemChange(
                item_id=item_id,
                status="failed",
                attempts=0,
                evidence=shown,
                history=history,
            ),
            task_state="failed",
            status_text=f"Item {item_id} refused: {said} (policy onWeakCheck: refuse). Write "
            "a check that fails until the item is done.",
            transitions=[
                Transition(
                    item_id=item_id,
                    attempt=0,
                    from_state=item.status,
                    to_state="failed",
                    reason=f"{said}; refused (policy onWeakCheck: refuse)",
                ),
                Transition(
                    from_state="working", to_state="failed", reason=f"item {item_id} refused"
                ),
            ],
            charge=Charge(kind="command"),
            runs=runs,
        )
        record = await self.endings.failing_item(view, item, record, history=history)
        return Concluded(record, StepResult("failed", 0))

    async def weak_in_plan(
        self, task_id: str, attempt: int, items: list[NewItem], acceptance: JSON | None = None
    ) -> list[str]:
        """Pre-check a plan the model drafted, before it is accepted: what to tell the model
        of each check that already passes, the items' (those that opt out are not checked)
        and the plan's own (`acceptance`). One keyed effect for the whole plan at this
        planning try."""
        checked = [i for i in items if i.precheck and not i.ask]
        if not checked and acceptance is None:
            return []
        key = effect_key(task_id, "plancheck", scope=PLAN_SCOPE, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        effect = Effect(
            key=key, step="plancheck", item_id=None, attempt=None, spend=Spend(),
            integrity="tree",
        )  # fmt: skip

        async def perform() -> JSON:
            found: list[JSON] = []
            for item in checked:
                result = await self.ctx.run_in_workspace(
                    task_id,
                    item.verify_command,
                    item_id=item.item_id,
                    attempt=0,
                    key=key,
                    timeout_s=item.verify_timeout_s,
                )
                found.append({"item": item.item_id, "command": result.as_json()})
            if acceptance is not None:
                result = await self.ctx.run_in_workspace(
                    task_id,
                    str(acceptance["command"]),
                    item_id=PLAN_SCOPE,
                    attempt=0,
                    key=key,
                    timeout_s=int(acceptance.get("timeout_s") or 600),
                )
                found.append({"acceptance": True, "command": result.as_json()})
            return {"checks": found}

        async def conclude(value: JSON, runs: int) -> Concluded:
            weak = [
                WEAK_ACCEPTANCE.format(command=c["command"]["command"])
                if c.get("acceptance")
                else WEAK_PLAN_CHECK.format(item=c["item"], command=c["command"]["command"])
                for c in value["checks"]
                if CommandResult.from_json(c["command"]).passed
            ]
            record = StepRecord(
                effect_key=key, step="plancheck", result=value, runs=runs,
                charge=Charge(kind="command"),
            )  # fmt: skip
            return Concluded(record, StepResult.ok(payload={"weak": weak}))

        checked_plan = await self.effects.run(view, effect, perform, conclude)
        if checked_plan.outcome != "ok":
            return []  # stopped (the task ended): the caller's record says so
        return list(checked_plan.payload.get("weak", []))
