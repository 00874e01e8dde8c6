"""Publishing: once every check passed, the task's commits go to the caller's branch
(`{"publish": {"git": {"url", "branch", "credential"}}}`).

It is irreversible, so a person approves it first (an `irreversible_action` request,
`publish`: approve, skip, or reject), unless the policy says `approvePublish: false`. It is
one keyed effect: a crash after the push and before its record runs it again, which finds
the branch already holding the commits and pushes nothing. It is never forced: a branch that
moved on elsewhere is reported and the task fails saying so (its diff and bundle still hold
the work). The outcome is in the report (`publish`) and in `metadata.publish`.
"""

from __future__ import annotations

import dataclasses

from a2a_agent.budget import Spend
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.git_remote import RemoteError
from a2a_agent.watched import crash_point
from persistence.records import Charge, StepRecord, StepView, Transition

PAUSE_ID = "publish"


class Publisher:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings

    async def publish(self, task_id: str) -> StepResult:
        key = effect_key(task_id, "publish")
        view = await self.ctx.view(task_id, key=key, budget=True)
        target = view.policy.get("publish")
        if not isinstance(target, dict) or view.is_terminal:
            return StepResult.ok()
        head = self.ctx.workspace(task_id).head()
        if head is None:
            return StepResult.ok()
        where = f"{target['url']} branch {target['branch']}"
        ask = None
        if view.policy.get("approve_publish", True):
            ask = self.effects.pauses.request(
                view,
                pause_id=PAUSE_ID,
                kind="irreversible_action",
                summary=f"Every check passed. Push the task's commits (up to {head[:12]}) to "
                f"{where}? Approve to push (never forced), skip to finish without pushing, "
                "or reject (the task fails).",
                details={"url": target["url"], "branch": target["branch"], "commit": head},
            )
        effect = Effect(
            key=key,
            step="publish",
            item_id=None,
            attempt=None,
            spend=Spend(),
            integrity="tree",
            ask=ask,
            refused=lambda decided: {"decision": decided.decision, "by": decided.by},
        )

        async def perform() -> JSON:
            ws = self.ctx.workspace(task_id)
            try:
                pushed = await self.ctx.config.remote.push(
                    ws.root, target["url"], target["branch"], head,
                    credential=target.get("credential"),
                )  # fmt: skip
            except RemoteError as exc:
                return {"result": "error", "commit": head, "detail": str(exc)}
            crash_point(self.ctx.config.fault_file, "publish-pushed")  # tests only
            return dataclasses.asdict(pushed)

        async def conclude(value: JSON, runs: int) -> Concluded:
            return await self._concluded(view, key, target, value, runs)

        return await self.effects.run(view, effect, perform, conclude)

    async def _concluded(
        self, view: StepView, key: str, target: JSON, value: JSON, runs: int
    ) -> Concluded:
        where = f"{target['url']} branch {target['branch']}"
        place = {"url": target["url"], "branch": target["branch"]}
        if "decision" in value:
            who = value.get("by") or "the caller"
            if value["decision"] == "skip":
                shown = {"result": "skipped", "by": who, **place}
                said = f"not published to {where} (skipped by {who})"
                return await self._record(view, key, value, runs, shown=shown, said=said)
            shown = {"result": "rejected", "by": who, **place}
            said = f"publishing to {where} was rejected by {who}"
            return await self._record(view, key, value, runs, shown=shown, said=said, ends=True)
        shown = {**value, **place}
        commit = str(value["commit"])[:12]
        if value["result"] == "pushed":
            said = f"published {commit} to {where}"
            return await self._record(view, key, value, runs, shown=shown, said=said)
        if value["result"] == "already":
            said = f"{where} already held {commit}: nothing to push"
            return await self._record(view, key, value, runs, shown=shown, said=said)
        said = (
            f"the work is done and verified, but publishing to {where} did not happen: "
            f"{value.get('detail')}. Nothing was forced; the diff and bundle artifacts hold "
            "the work"
        )
        return await self._record(view, key, value, runs, shown=shown, said=said, ends=True)

    async def _record(
        self,
        view: StepView,
        key: str,
        value: JSON,
        runs: int,
        *,
        shown: JSON,
        said: str,
        ends: bool = False,
    ) -> Concluded:
        """The outcome on record (`metadata.publish`, and the report through the policy);
        `ends`: not published, so the task fails saying why."""
        record = StepRecord(
            effect_key=key,
            step="publish",
            result={**value, "outcome": "failed"} if ends else value,
            metadata_patch={"publish": shown},
            policy_patch={"published": shown},
            transitions=[
                Transition(
                    from_state=view.state,
                    to_state="failed" if ends else view.state,
                    reason=said[:1000],
                )
            ],
            charge=Charge(kind="command"),
            runs=runs,
        )
        if not ends:
            return Concluded(record, StepResult.ok(), fingerprint=False)
        after = dataclasses.replace(view, policy={**view.policy, "published": shown})
        record = dataclasses.replace(
            record,
            task_state="failed",
            status_text=f"Not completed: {said}.",
            report=await self.endings.report(after),
        )
        record = await self.endings.closing_record(after, record)
        self.ctx.forget(view.task_id)
        return Concluded(record, StepResult("failed"))
