"""The model's tools that ask a person: `ask_person` and `propose_plan_change`.

Such a call pauses the run (a `question` or `plan_change` request) instead of running; once a
person decided, the same call (same key) concludes with what they said, and the model reads it
as the tool's result. An approved plan change is applied by `DecisionSteps.apply_decision`
(items added at the end, items not done removed as skipped); until then nothing changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from a2a_agent.budget import BudgetStop, Spend
from a2a_agent.errors import PlanError
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.pauses import Pauses, asked_here, decided_to_go_on
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.plans import PlanLimits, parse_plan
from a2a_agent.wire import from_wire
from persistence.records import (
    Charge,
    Decision,
    EffectStart,
    ItemRow,
    NewItem,
    PauseRequest,
    StepRecord,
    StepView,
)

MAX_QUESTION_CHARS = 4000


def asking_id(name: str, key: str, item_id: str, attempt: int) -> str:
    prefix = "ask" if name == "ask_person" else "change"
    return f"{prefix}.{item_id}.{attempt}.{key.rsplit(':', 1)[-1]}"


class AskingTools:
    def __init__(
        self, ctx: StepContext, pauses: Pauses, endings: RunEndings, limits: PlanLimits
    ) -> None:
        self.ctx = ctx
        self.pauses = pauses
        self.endings = endings
        self.limits = limits

    async def call(
        self,
        view: StepView,
        *,
        key: str,
        item_id: str,
        attempt: int,
        tool_use: JSON,
        then: EffectStart | None,
    ) -> StepResult:
        name = str(tool_use.get("name"))
        args: dict[str, Any] = dict(tool_use.get("input") or {})
        pause_id = asking_id(name, key, item_id, attempt)
        decided = view.decisions.get(pause_id)
        if decided is not None and asked_here(decided):
            return StepResult("paused", attempt)
        if decided is None:
            try:  # an asking call is an action like any other tool call
                await self.ctx.guard.check(view.task_id, view.budget or {}, Spend(tool=name))
            except BudgetStop as stop:
                return await self.endings.budget_stop(view, stop.spent)
            try:
                request = self._request(
                    view, name, args, pause_id=pause_id, item_id=item_id, attempt=attempt
                )
            except PlanError as exc:
                told, is_error = f"error: {exc}", True
            else:
                return await self.pauses.ask(view, request, attempt)
        else:
            told, is_error = self._told(name, decided), not decided_to_go_on(decided)
        value = {"tool_use_id": tool_use["id"], "content": told, "is_error": is_error}
        record = StepRecord(
            effect_key=key,
            step="tool",
            result=value,
            item_id=item_id,
            attempt=attempt,
            charge=Charge(kind="tool", tool=name, actions=1),
            then=then,
        )
        outcome = await self.ctx.record(view, record, fingerprint=False)
        return StepResult.ok(outcome.result or value, attempt=attempt)

    def _request(
        self,
        view: StepView,
        name: str,
        args: dict[str, Any],
        *,
        pause_id: str,
        item_id: str,
        attempt: int,
    ) -> PauseRequest:
        if name == "ask_person":
            question = args.get("question")
            if not isinstance(question, str) or not question.strip():
                raise PlanError("question must be a non-empty string")
            question = question.strip()[:MAX_QUESTION_CHARS]
            return self.pauses.request(
                view,
                pause_id=pause_id,
                kind="question",
                summary=f"The worker on item `{item_id}` asks: {question}",
                details={"item": item_id, "question": question, "asked_by": "model"},
                item_id=item_id,
                attempt=attempt,
            )
        add, remove = args.get("add") or [], args.get("remove") or []
        change = args.get("change") or []
        reason = args.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise PlanError("reason must say why the plan should change")
        lists = (add, remove, change)
        if not all(isinstance(x, list) for x in lists) or not any(lists):
            raise PlanError(
                "give items to add, items to change ({id, and title, run, verify or "
                "max_attempts}) and/or item ids to remove, each a list"
            )
        existing = {i.item_id: i for i in view.items}
        items = from_wire(add, "add")
        added = parse_plan({"goal": view.goal, "items": items}, self.limits).items if add else []
        changed = [self._changed(existing, entry, item_id) for entry in change]
        clash = sorted({i.item_id for i in added} & set(existing))
        if clash:
            raise PlanError(f"items {clash} are in the plan already; give new ids")
        for target in remove:
            if target not in existing:
                raise PlanError(f"there is no item {target!r} to remove")
            if existing[target].status == "done":
                raise PlanError(f"item {target!r} is done; done items are never removed")
            if target == item_id:
                raise PlanError("the item being worked cannot be removed while it is worked")
        parts = []
        if added:
            parts.append("add " + ", ".join(f"`{i.item_id}` ({i.title})" for i in added))
        if changed:
            parts.append("change " + ", ".join(f"`{i.item_id}`" for i in changed))
        if remove:
            parts.append("remove " + ", ".join(f"`{r}`" for r in remove))
        return self.pauses.request(
            view,
            pause_id=pause_id,
            kind="plan_change",
            options_of="plan_review",
            summary=f"The worker on item `{item_id}` proposes to {' and '.join(parts)}: "
            f"{reason.strip()}",
            details={
                "add": [dataclasses.asdict(i) for i in added],
                "change": [dataclasses.asdict(i) for i in changed],
                "remove": [str(r) for r in remove],
                "reason": reason.strip(),
            },
            item_id=item_id,
            attempt=attempt,
        )

    def _changed(self, existing: dict[str, ItemRow], entry: Any, working: str) -> NewItem:
        """An item's new definition, checked as a plan item is."""
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise PlanError('each change is an object with the "id" of the item to change')
        extra = sorted(set(entry) - {"id", "title", "run", "verify", "max_attempts"})
        if extra:
            raise PlanError(f"a change may give title, run, verify, max_attempts; not {extra}")
        item = existing.get(entry["id"])
        if item is None:
            raise PlanError(f"there is no item {entry['id']!r} to change")
        if item.status in ("done", "skipped") or item.item_id == working:
            raise PlanError(f"item {item.item_id!r} is {item.status}; only items not begun change")
        merged: dict[str, Any] = {
            "id": item.item_id,
            "title": entry.get("title", item.title),
            "verify": entry.get("verify", item.verify_command),
            "max_attempts": entry.get("max_attempts", item.max_attempts),
        }
        run = entry.get("run", item.run)
        if run is not None:
            merged["run"] = run
        return parse_plan({"goal": "change", "items": [merged]}, self.limits).items[0]

    @staticmethod
    def _told(name: str, decided: Decision) -> str:
        note = f" Their note: {decided.note}" if decided.note else ""
        if name == "ask_person":
            if decided.decision == "answer":
                return f"The person answered: {decided.note or '(no text)'}"
            return f"The person did not answer ({decided.decision}).{note}"
        if decided_to_go_on(decided):
            return f"Approved: the plan changed as proposed.{note}"
        return f"Not approved ({decided.decision}): the plan is unchanged.{note}"
