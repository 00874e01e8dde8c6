"""The steps around a pause: asking (a question item, a plan review) and, at the start of the
segment a reply started, applying what the person decided.

`apply_decision` is keyed by the request, so a segment re-run after a crash applies it once.
A decision that lets the run go on changes nothing here: the step that paused finds it in its
view and runs under its own key. One that does not (reject, skip, stop) is applied here.
"""

from __future__ import annotations

from typing import Protocol

from a2a_agent.harness.checks.acceptance import PAUSE_ID as WEAK_PLAN_CHECK
from a2a_agent.harness.checks.regressions import reopened
from a2a_agent.harness.kernel.attempts import verify_start
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import recorded
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.pauses import Pauses, asked_here
from a2a_agent.harness.kernel.results import StepResult
from a2a_agent.harness.workspace.files import overwrite_within
from persistence.records import (
    Decision,
    Fact,
    ItemChange,
    ItemRow,
    NewItem,
    StepRecord,
    StepView,
    Transition,
)


class Forwarding(Protocol):
    """Who hands a person's answer on to a peer's task (the delegation room's `Delegator`,
    set by the runtime: the checks room does not import it)."""

    async def forward(self, view: StepView, decided: Decision) -> StepResult: ...


ANSWERS_DIR = "answers"


def answer_path(item_id: str) -> str:
    return f"{ANSWERS_DIR}/{item_id}.md"


def _who(decided: Decision) -> str:
    if decided.how == "expired":
        return "by default (the request expired)"
    return f"by {decided.by or 'the caller'}"


class DecisionSteps:
    def __init__(
        self,
        ctx: StepContext,
        endings: RunEndings,
        pauses: Pauses,
        *,
        delegator: Forwarding | None = None,
    ) -> None:
        self.ctx = ctx
        self.endings = endings
        self.pauses = pauses
        self.delegator = delegator  # None: no delegate's request is forwarded

    # ---- asking ---------------------------------------------------------------------------

    async def ask_item(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        """A question item: ask its question (once; the answer moves the item on)."""
        view = await self.ctx.view(task_id)
        item = view.item(item_id)
        pause_id = f"question.{item_id}"
        if pause_id in view.decisions:
            if asked_here(view.decisions[pause_id]):
                return StepResult("paused", attempt)
            return StepResult.ok(attempt=attempt)
        request = self.pauses.request(
            view,
            pause_id=pause_id,
            kind="question",
            summary=f"Item `{item_id}` asks: {item.ask}",
            details={"item": item_id, "question": item.ask, "verify": item.verify_command},
            item_id=item_id,
            attempt=attempt,
        )
        return await self.pauses.ask(view, request, attempt)

    async def review_plan(self, task_id: str) -> StepResult:
        """With policy review_plan, the drafted plan waits for approval before any work."""
        view = await self.ctx.view(task_id)
        if "plan_review" in view.decisions and asked_here(view.decisions["plan_review"]):
            return StepResult("paused")
        if not view.policy.get("review_plan") or "plan_review" in view.decisions:
            return StepResult.ok()
        plan = [
            {"id": i.item_id, "title": i.title, "run": i.run, "verify": i.verify_command}
            for i in view.items
        ]
        request = self.pauses.request(
            view,
            pause_id="plan_review",
            kind="plan_review",
            summary=f"The drafted plan has {len(plan)} item(s): "
            + ", ".join(f"{p['id']} ({p['title']})" for p in plan)
            + ". Approve to start the work, or reject (the run stops).",
            details={"items": plan},
        )
        return await self.pauses.ask(view, request)

    # ---- applying -------------------------------------------------------------------------

    async def apply_decision(self, task_id: str) -> StepResult:
        """Apply the decision that started this segment (one asked in the segment before)."""
        view = await self.ctx.view(task_id)
        if view.is_terminal:
            return StepResult("stopped")
        asked = [d for d in view.decisions.values() if d.segment == view.segment - 1]
        if not asked:
            return StepResult.ok()
        decided = asked[-1]
        kind, choice = decided.kind, decided.decision
        why = f"`{decided.id}`: {choice} {_who(decided)}" + (
            f": {decided.note}" if decided.note else ""
        )
        item = view.item(decided.item_id) if decided.item_id else None
        if decided.id.startswith(("ask.", "change.")) and kind != "plan_change":
            return StepResult.ok()  # the model's question: its tool call reads the answer
        if decided.id == "publish":
            return StepResult.ok()  # the publishing step concludes with what was decided
        if kind == "delegated_request":
            # A delegate's question, answered here: a peer gets the answer now (a child run
            # of this service got it when it was given); the wait for it goes on.
            if self.delegator is not None and decided.how in ("reply", "expired"):
                return await self.delegator.forward(view, decided)
            return StepResult.ok()
        if kind == "plan_change":
            if choice == "approve":
                return await self._change_plan(view, decided, why)
            return StepResult.ok()  # the model is told the plan is unchanged
        if kind == "regression":
            return await self._regression(view, decided, why)
        if decided.id == WEAK_PLAN_CHECK:
            if choice == "approve":
                return StepResult.ok()  # the plan's pre-check finds it and goes on, flagged
            return await self._stop(
                view,
                decided,
                "the plan's acceptance check already passes before any work and was not "
                f"approved ({why}); nothing of the plan was worked",
            )
        if kind == "question" and item is not None:
            if choice == "answer":
                return await self._answered(view, item, decided)
            return await self._stop(
                view, decided, f"item {item.item_id}'s question was not answered ({why})"
            )
        if choice in ("approve", "retry", "answer"):
            if kind == "repeated_failure" and item is not None:
                return await self._retry(view, item, decided, why)
            if kind == "stale_fact":
                return await self._accept_facts(view, decided, why)
            return StepResult.ok()
        if choice == "skip" and item is not None:
            return await self._skip(view, item, decided, why)
        if (
            kind == "irreversible_action"
            and decided.id.startswith("command.")
            and ".tool." in (decided.id)
        ):
            return StepResult.ok()  # a tool call: the model is told it was refused
        return await self._stop(view, decided, f"stopped at {kind.replace('_', ' ')} {why}")

    async def _accept_facts(self, view: StepView, decided: Decision, why: str) -> StepResult:
        """A person accepted the facts' new values: they are the facts now."""
        changed = decided.details.get("facts") or []
        record = StepRecord(
            effect_key=effect_key(view.task_id, f"decide.{decided.id}"),
            step="decide",
            result={"decision": decided.decision},
            facts=[
                Fact(
                    key=str(c["key"]),
                    value=str(c["new"]),
                    source=str(c.get("source") or "checked again"),
                    check=c.get("check"),
                    max_age_s=c.get("max_age_s"),
                )
                for c in changed
            ],
            transitions=[
                Transition(
                    from_state=view.state,
                    to_state=view.state,
                    reason=f"new fact values accepted: {why}",
                )
            ],
        )
        return await self.ctx.advance(view, record)

    async def _change_plan(self, view: StepView, decided: Decision, why: str) -> StepResult:
        """An approved plan change: new items after the last, removed items skipped."""
        added = [NewItem(**raw) for raw in decided.details.get("add") or []]
        removed = [str(r) for r in decided.details.get("remove") or []]
        key = effect_key(view.task_id, f"decide.{decided.id}")
        what = ", ".join(i.item_id for i in added) or "none"
        record = StepRecord(
            effect_key=key,
            step="decide",
            result={"decision": decided.decision},
            new_items=added,
            first_position=max((i.position for i in view.items), default=-1) + 1,
            transitions=[
                Transition(
                    from_state=view.state,
                    to_state=view.state,
                    reason=f"plan changed ({why}): added {what}; "
                    f"removed {', '.join(removed) or 'none'}",
                )
            ],
        )
        result = await self.ctx.advance(view, record)
        for raw in decided.details.get("change") or []:
            new = NewItem(**raw)
            current = await self.ctx.view(view.task_id)
            item = current.item(new.item_id)
            definition = {
                "title": new.title,
                "run": new.run,
                "verify_command": new.verify_command,
                "verify_timeout_s": new.verify_timeout_s,
                "run_timeout_s": new.run_timeout_s,
                "max_attempts": new.max_attempts,
            }
            changing = StepRecord(
                effect_key=f"{key}.change.{new.item_id}",
                step="decide",
                result={"changed": new.item_id},
                item=ItemChange(
                    item_id=item.item_id,
                    status=item.status,
                    attempts=item.attempts,
                    definition=definition,
                ),
                transitions=[
                    Transition(
                        item_id=item.item_id,
                        attempt=item.attempts,
                        from_state=item.status,
                        to_state=item.status,
                        reason=f"changed by the plan change ({why}): run `{new.run}`, "
                        f"verify `{new.verify_command}`",
                    )
                ],
            )
            result = await self.ctx.advance(current, changing)
        for item_id in removed:
            current = await self.ctx.view(view.task_id)
            item = current.item(item_id)
            if item.status in ("done", "skipped"):
                continue
            change = ItemChange(item_id=item_id, status="skipped", attempts=item.attempts)
            removal = StepRecord(
                effect_key=f"{key}.remove.{item_id}",
                step="decide",
                result={"removed": item_id},
                item=change,
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=item.attempts,
                        from_state=item.status,
                        to_state="skipped",
                        reason=f"removed from the plan: {why}",
                    )
                ],
            )
            result = await self.ctx.advance(current, removal)
        return result

    async def _regression(self, view: StepView, decided: Decision, why: str) -> StepResult:
        """Items whose check failed when re-verified: reopened for a new attempt, skipped, or
        (reject) the run fails."""
        choice = decided.decision
        if choice not in ("reopen", "skip"):
            return await self._stop(view, decided, f"stopped at a regression {why}")
        asked = [str(i["item"]) for i in decided.details.get("items") or []]
        items = [i for i in view.items if i.item_id in asked and i.status == "regressed"]
        if choice == "reopen":
            changes = [reopened(i, i.history, why, decided.id) for i in items]
        else:
            changes = [
                ItemChange(
                    item_id=i.item_id,
                    status="skipped",
                    attempts=i.attempts,
                    history=with_attempt(i, i.attempts, outcome=f"skipped {_who(decided)}"),
                )
                for i in items
            ]
        record = StepRecord(
            effect_key=effect_key(view.task_id, f"decide.{decided.id}"),
            step="decide",
            result={"decision": choice},
            item=changes[0] if changes else None,
            more_items=changes[1:],
            transitions=[
                Transition(
                    item_id=c.item_id,
                    attempt=c.attempts + (choice == "reopen"),
                    from_state="regressed",
                    to_state=c.status,
                    reason=f"{'reopened' if choice == 'reopen' else 'skipped'}: {why}",
                )
                for c in changes
            ],
        )
        return await self.ctx.advance(view, record)

    async def _stop(self, view: StepView, decided: Decision, reason: str) -> StepResult:
        await self.endings.fail(view, reason, decided=decided)
        return StepResult("stopped")

    def _record(
        self,
        view: StepView,
        decided: Decision,
        item: ItemChange,
        transition: Transition,
        then_verify: bool = False,
    ) -> StepRecord:
        return StepRecord(
            effect_key=effect_key(view.task_id, f"decide.{decided.id}"),
            step="decide",
            result={"decision": decided.decision},
            item=item,
            transitions=[transition],
            then=verify_start(view.task_id, item.item_id, item.attempts) if then_verify else None,
        )

    async def _skip(self, view: StepView, item: ItemRow, decided: Decision, why: str) -> StepResult:
        change = ItemChange(
            item_id=item.item_id,
            status="skipped",
            attempts=item.attempts,
            history=with_attempt(item, item.attempts, outcome=f"skipped {_who(decided)}"),
        )
        transition = Transition(
            item_id=item.item_id,
            attempt=item.attempts,
            from_state=item.status,
            to_state="skipped",
            reason=f"skipped: {why}",
        )
        return await self.ctx.advance(view, self._record(view, decided, change, transition))

    async def _retry(
        self, view: StepView, item: ItemRow, decided: Decision, why: str
    ) -> StepResult:
        """One more attempt for an item that used all of its own."""
        change = ItemChange(
            item_id=item.item_id,
            status="pending",
            attempts=item.attempts,
            failures=item.max_attempts - 1,
        )
        transition = Transition(
            item_id=item.item_id,
            attempt=item.attempts,
            from_state=item.status,
            to_state="pending",
            reason=f"one more attempt: {why}",
        )
        return await self.ctx.advance(view, self._record(view, decided, change, transition))

    async def _answered(self, view: StepView, item: ItemRow, decided: Decision) -> StepResult:
        """The answer goes to the item's record and to answers/<item>.md; then its check."""
        answer = decided.note or ""
        ws = self.ctx.workspace(view.task_id)
        text = f"# {item.title}\n\n{item.ask}\n\n## Answer\n\n{answer}\n"
        # Written once: killed after this step's record and before the engine's, the step
        # runs again, and writing the file again would change the tree the record holds (the
        # next check would restore the checkpoint and restart the item).
        key = effect_key(view.task_id, f"decide.{decided.id}")
        if not recorded(await self.ctx.view(view.task_id, key=key)):
            overwrite_within(ws.root, answer_path(item.item_id), text)
        change = ItemChange(
            item_id=item.item_id,
            status="verifying",
            attempts=item.attempts,
            history=with_attempt(
                item,
                item.attempts,
                work={
                    "by": decided.by or "the caller",
                    "answer": answer,
                    "file": answer_path(item.item_id),
                },
            ),
        )
        transition = Transition(
            item_id=item.item_id,
            attempt=item.attempts,
            from_state=item.status,
            to_state="verifying",
            reason=f"answered {_who(decided)}: {answer[:300]}; verifying with "
            f"`{item.verify_command}`",
        )
        record = self._record(view, decided, change, transition, then_verify=True)
        return await self.ctx.advance(view, record, item.attempts)
