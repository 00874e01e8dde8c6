"""Steps of the work the model does: plan a goal, and work an item with tools.

Like the plan harness, nothing here knows about DBOS. Model calls and tool calls are keyed
effects (`effects.py`): a re-run after a crash returns the recorded result, so a model call
is never paid for twice and a recorded tool call never runs twice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol

from a2a_agent.budget import Spend
from a2a_agent.errors import ModelError, PlanError
from a2a_agent.harness.checks.prechecks import PreChecks
from a2a_agent.harness.kernel.attempts import to_verification, within_item
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects, recorded
from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.keys import PLAN_SCOPE, effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.model import prompts
from a2a_agent.harness.model.asking import AskingTools
from a2a_agent.harness.model.repo_context import overview
from a2a_agent.harness.model.tools import (
    ASKING_SPECS,
    ASKING_TOOLS,
    DELEGATE_SPEC,
    TOOL_SPECS,
    WorkspaceTools,
)
from a2a_agent.model import Model
from a2a_agent.model.types import ModelRequest, ModelResponse
from a2a_agent.plans import PlanLimits, parse_plan
from a2a_agent.wire import from_wire
from persistence.records import (
    Charge,
    Decision,
    EffectStart,
    Fact,
    ModelCall,
    StepRecord,
    StepView,
    Transition,
)


class Delegating(Protocol):
    """Who runs the model's `delegate` tool (the delegation room's `Delegator`, set by the
    runtime: the model room does not import it)."""

    async def call(
        self,
        view: StepView,
        *,
        key: str,
        item_id: str,
        attempt: int,
        tool_use: JSON,
        then: EffectStart | None,
    ) -> StepResult: ...


PROGRESS_TAIL_CHARS = 3000


@dataclass(frozen=True)
class ModelConfig:
    max_tokens: int
    min_output_tokens: int
    compact_at_tokens: int
    max_turns: int
    plan_tries: int
    tool_output_bytes: int
    bash_timeout_s: int
    plan_limits: PlanLimits
    repo_context_tokens: int = 4000  # what the model is shown of a caller's repository


def tool_start(task_id: str, item_id: str, attempt: int, turn: int, n: int) -> EffectStart:
    key = effect_key(task_id, f"tool.{turn}.{n}", scope=item_id, attempt=attempt)
    return EffectStart(key=key, step="tool", item_id=item_id, attempt=attempt)


class ModelWork:
    def __init__(
        self,
        ctx: StepContext,
        effects: Effects,
        model: Model | None,
        config: ModelConfig,
        *,
        delegator: Delegating | None = None,
    ) -> None:
        self.ctx = ctx
        self.effects = effects
        self.model = model
        self.config = config
        self.asking = AskingTools(ctx, effects.pauses, effects.endings, config.plan_limits)
        self.prechecks = PreChecks(ctx, effects, effects.endings)
        self.delegator = delegator  # None: the model gets no `delegate` tool

    def _model(self) -> Model:
        if self.model is None:
            raise ModelError("no model is configured: set ANTHROPIC_API_KEY")
        return self.model

    async def call_model(self, task_id: str, call: JSON) -> StepResult:
        """One model call as a keyed effect. `call`: key, purpose (plan | work | compact),
        item_id, attempt, turn, context_tokens (the last call's), request. Checked against
        the budget with its maximum cost (fitted to what is left) and the item's time; its
        response, usage and charge are recorded together (never paid twice)."""
        key = str(call["key"])
        item_id, attempt = call.get("item_id"), call.get("attempt")
        view = await self.ctx.view(task_id, key=key, budget=True)
        model = self._model()
        if item_id is not None and not recorded(view):
            item = view.item(str(item_id))
            if within_item(item, 1) is None:
                return await self.effects.endings.out_of_time(view, item, int(attempt or 0))
        request = ModelRequest.from_json(call["request"])
        # The request's own size, or what the previous call of the turn read and wrote, if
        # more (the model's count, which a character estimate can miss by far).
        input_tokens = max(
            prompts.estimated_tokens(request.messages) + len(request.system) // 4,
            int(call.get("context_tokens") or 0),
        )
        fitted = self._fit_to_budget(view, model.name, input_tokens, request.max_tokens)
        request = dataclasses.replace(request, max_tokens=fitted)
        tokens, usd = self.ctx.guard.reservation(model.name, input_tokens, request.max_tokens)
        effect = Effect(
            key=key,
            step="model",
            item_id=item_id,
            attempt=attempt,
            spend=Spend(tokens=tokens, usd=usd),
            integrity="none",
        )

        async def perform() -> JSON:
            return (await model.complete(request)).as_json()

        async def conclude(value: JSON, runs: int) -> Concluded:
            response = ModelResponse.from_json(value)
            usage = response.usage
            then = None
            if call["purpose"] == "work" and response.tool_uses and item_id is not None:
                then = tool_start(task_id, item_id, int(attempt or 0), int(call["turn"]), 0)
            record = StepRecord(
                effect_key=key,
                step="model",
                result=value,
                item_id=item_id,
                attempt=attempt,
                model_call=ModelCall(
                    purpose=str(call["purpose"]),
                    model=response.model,
                    stop_reason=response.stop_reason,
                    input_tokens=usage.input_tokens,
                    output_tokens=usage.output_tokens,
                    cache_read_tokens=usage.cache_read_tokens,
                    cache_write_tokens=usage.cache_write_tokens,
                ),
                charge=Charge(
                    kind="model",
                    tokens=usage.context_tokens + usage.output_tokens,
                    usd=self.ctx.guard.cost(response.model, usage),
                ),
                runs=runs,
                then=then,
            )
            return Concluded(record, StepResult.ok(value), fingerprint=False)

        return await self.effects.run(view, effect, perform, conclude)

    def _fit_to_budget(self, view: StepView, model: str, input_tokens: int, max_tokens: int) -> int:
        """The call's max_tokens, lowered to what the budget can still pay for, but not below
        the floor (A2A_AGENT_MODEL_MIN_TOKENS, or max_tokens if lower): a small budget still
        gets calls made, and when even the floor does not fit, the budget check that follows
        stops the run and names the reservation that did not fit."""
        room = self.ctx.guard.output_room(view.budget or {}, model, input_tokens)
        if room is None or room[0] >= max_tokens:
            return max_tokens
        return max(int(room[0]), min(self.config.min_output_tokens, max_tokens))

    # ---- planning -----------------------------------------------------------------------

    async def planning_request(self, task_id: str) -> StepResult:
        view = await self.ctx.view(task_id)
        request = ModelRequest(
            system=prompts.PLANNER_SYSTEM,
            messages=prompts.planning_messages(view.goal, await self._repository(view)),
            tools=[prompts.SUBMIT_PLAN],
            max_tokens=self.config.max_tokens,
            force_tool=prompts.SUBMIT_PLAN.name,
        )
        return StepResult.ok(request.as_json())

    async def accept_plan(self, task_id: str, attempt: int, plan: Any) -> StepResult:
        """Validate the model's plan; store it, or say what is wrong so the model can fix it."""
        try:
            # The model writes the plan as callers do (camelCase, or either spelling).
            parsed = parse_plan(from_wire(plan, "plan"), self.config.plan_limits)
        except PlanError as exc:
            return StepResult("retry", attempt, {"errors": str(exc)})
        weak = await self.prechecks.weak_in_plan(task_id, attempt, parsed.items, parsed.acceptance)
        if weak:
            return StepResult("retry", attempt, {"errors": "; ".join(weak)})
        view = await self.ctx.view(task_id)
        summary = ", ".join(i.item_id for i in parsed.items)
        record = StepRecord(
            effect_key=effect_key(task_id, "accept", scope=PLAN_SCOPE, attempt=attempt),
            step="accept_plan",
            result={},
            new_items=parsed.items,
            policy_patch={"acceptance": parsed.acceptance} if parsed.acceptance else None,
            task_state="working",
            status_text=f"Planned {len(parsed.items)} item(s): {summary}",
            transitions=[
                Transition(
                    to_state="working",
                    reason=f"plan accepted: {len(parsed.items)} item(s): {summary}",
                )
            ],
        )
        return await self.ctx.advance(view, record, attempt)

    # ---- working an item ----------------------------------------------------------------

    async def item_request(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        view = await self.ctx.view(task_id)
        item = view.item(item_id)
        progress = self.ctx.workspace(task_id).root / "progress.md"
        tail = progress.read_text()[-PROGRESS_TAIL_CHARS:] if progress.exists() else ""
        # What people said: the caller's steering notes, and notes on this item's decisions.
        steering = await self.ctx.runs.notes(task_id)
        notes = [note.text for note in steering]
        notes += [
            f"({d.id}: {d.decision}) {d.note}"
            for d in view.decisions.values()
            if d.item_id == item_id and d.note and d.how == "reply"
        ]
        messages = prompts.item_messages(
            notes=notes,
            goal=view.goal,
            items=view.items,
            item=item,
            attempt=attempt,
            progress_tail=tail,
            last_failure=item.evidence if item.failures else None,
            repository=await self._repository(view),
        )
        request = ModelRequest(
            system=prompts.WORKER_SYSTEM,
            messages=messages,
            tools=[*TOOL_SPECS, *ASKING_SPECS, *([DELEGATE_SPEC] if self.delegator else [])],
            max_tokens=self.config.max_tokens,
        )
        return StepResult.ok(
            {
                "request": request.as_json(),
                "compact_at": self.config.compact_at_tokens,
                "max_turns": self.config.max_turns,
                "notes_seq": steering[-1].seq if steering else 0,
            },
            attempt=attempt,
        )

    async def _repository(self, view: StepView) -> str:
        """For a workspace that started from the caller's code: what it holds."""
        if view.seed is None:
            return ""
        ws = self.ctx.workspace(view.task_id)
        return await overview(ws, self.config.repo_context_tokens * 4)

    async def call_tool(
        self,
        task_id: str,
        item_id: str,
        attempt: int,
        tool_use: JSON,
        *,
        turn: int,
        n: int,
        uses: int,
        notes_seq: int = 0,
    ) -> StepResult:
        """Tool use `n` of the `uses` in the model's answer at `turn`, as a keyed effect,
        checked against the action budget first."""
        key = effect_key(task_id, f"tool.{turn}.{n}", scope=item_id, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        name = str(tool_use.get("name"))
        item = view.item(item_id)
        bash_timeout = within_item(item, self.config.bash_timeout_s)
        if bash_timeout is None and not recorded(view):
            return await self.effects.endings.out_of_time(view, item, attempt)
        if name in ASKING_TOOLS and not recorded(view):
            then = tool_start(task_id, item_id, attempt, turn, n + 1) if n + 1 < uses else None
            return await self.asking.call(
                view, key=key, item_id=item_id, attempt=attempt, tool_use=tool_use, then=then
            )
        if name == DELEGATE_SPEC.name and self.delegator is not None and not recorded(view):
            then = tool_start(task_id, item_id, attempt, turn, n + 1) if n + 1 < uses else None
            return await self.delegator.call(
                view, key=key, item_id=item_id, attempt=attempt, tool_use=tool_use, then=then
            )
        tool_input = tool_use.get("input") or {}
        command = tool_input.get("command") if name == "bash" else None

        def refused(decided: Decision) -> JSON:
            why = f": {decided.note}" if decided.note else ""
            return {
                "tool_use_id": tool_use["id"],
                "is_error": True,
                "content": f"Not run: a person did not approve this command ({decided.decision}"
                f"{why}). Do the item another way, or end your turn and say what is needed.",
            }

        effect = Effect(
            key=key,
            step="tool",
            item_id=item_id,
            attempt=attempt,
            spend=Spend(tool=name),
            integrity="checkpoint",
            action=command if isinstance(command, str) else None,
            refused=refused,
        )
        ws = self.ctx.workspace(task_id)

        async def perform() -> JSON:
            tools = WorkspaceTools(
                root=ws.root,
                env=self.ctx.command_env(task_id, item_id, attempt, key, ws.root),
                output_bytes=self.config.tool_output_bytes,
                max_timeout_s=bash_timeout or 1,
                pid_file=ws.command_pid_file,
                sandbox=self.ctx.config.sandbox,
                slots=self.ctx.config.command_slots,
            )
            outcome = await tools.call(name, tool_use.get("input") or {})
            return {"tool_use_id": tool_use["id"], **outcome.as_json()}

        async def conclude(value: JSON, runs: int) -> Concluded:
            then = tool_start(task_id, item_id, attempt, turn, n + 1) if n + 1 < uses else None
            if n + 1 == uses and "notes_seq" not in value:
                value = await self._with_new_notes(task_id, value, notes_seq)
            facts = []
            if name == "record_fact" and not value.get("is_error"):
                facts = [
                    Fact(
                        key=str(tool_input["key"]),
                        value=str(tool_input["value"]),
                        source=f"model (item {item_id})",
                        check=tool_input.get("check"),
                        max_age_s=tool_input.get("max_age_s"),
                    )
                ]
            record = StepRecord(
                facts=facts,
                effect_key=key,
                step="tool",
                result=value,
                item_id=item_id,
                attempt=attempt,
                charge=Charge(kind="tool", tool=name, actions=1),
                runs=runs,
                then=then,
            )
            return Concluded(record, StepResult.ok(value, attempt=attempt), fingerprint=False)

        return await self.effects.run(view, effect, perform, conclude)

    async def _with_new_notes(self, task_id: str, value: JSON, seen: int) -> JSON:
        """The last tool result of an answer carries the notes sent since the model's context
        was built, so a note reaches the turn in progress; `notes_seq` records how far, so a
        replay of this result is the same."""
        newer = [note for note in await self.ctx.runs.notes(task_id) if note.seq > seen]
        if not newer:
            return {**value, "notes_seq": seen}
        told = "\n".join(f"- {note.text}" for note in newer)
        return {
            **value,
            "content": f"{value.get('content', '')}\n\nNotes from the people you work for, "
            f"sent while you worked (follow them):\n{told}",
            "notes_seq": newer[-1].seq,
        }

    async def end_turn(self, task_id: str, item_id: str, attempt: int, note: str) -> StepResult:
        """The model stopped calling tools: record its progress note, then verification."""
        view = await self.ctx.view(task_id)
        item = view.item(item_id)
        note = " ".join(note.split())[:500] or "(no note)"
        record = to_verification(
            task_id,
            item,
            attempt,
            step="end_turn",
            done=f"model: {note}",
            history=with_attempt(item, attempt, work={"by": "model", "note": note}),
        )
        return await self.ctx.advance(view, record, attempt)
