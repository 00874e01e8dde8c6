"""Steps of the work the model does: plan a goal, and work an item with tools.

Like the plan harness, nothing here knows about DBOS: each public coroutine is one step, keyed
so that a re-run after a crash returns the recorded result (a model call is never paid for
twice, a tool call never runs twice once recorded).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from a2a_agent.budget import BudgetStop
from a2a_agent.errors import ModelError, PlanError
from a2a_agent.harness import prompts
from a2a_agent.harness.plan_harness import PlanHarness, idempotency_key
from a2a_agent.harness.tools import TOOL_SPECS, WorkspaceTools
from a2a_agent.model import Model
from a2a_agent.model.types import JSON, ModelRequest
from a2a_agent.plans import PlanLimits, parse_plan
from persistence.errors import NotFound
from persistence.records import (
    TERMINAL_STATES,
    Charge,
    ItemChange,
    ModelCall,
    StepRecord,
    Transition,
)

PROGRESS_TAIL_CHARS = 3000


@dataclass(frozen=True)
class ModelConfig:
    max_tokens: int
    compact_at_tokens: int
    max_turns: int
    plan_tries: int
    tool_output_bytes: int
    bash_timeout_s: int
    plan_limits: PlanLimits


class ModelWork:
    def __init__(self, harness: PlanHarness, model: Model | None, config: ModelConfig) -> None:
        self.harness = harness
        self.store = harness.store
        self.ledger = harness.ledger
        self.model = model
        self.config = config

    def _model(self) -> Model:
        if self.model is None:
            raise ModelError("no model is configured: set ANTHROPIC_API_KEY")
        return self.model

    async def call_model(
        self,
        task_id: str,
        *,
        key: str,
        purpose: str,
        item_id: str | None,
        attempt: int | None,
        request: JSON,
    ) -> JSON:
        """One model call as a keyed effect: checked against the budget with its maximum cost
        reserved, then its response, usage and charge stored together (never paid twice)."""
        effect = await self.ledger.get_effect(key)
        if effect is not None and effect.status == "completed" and effect.result is not None:
            return effect.result
        model = self._model()
        call = ModelRequest.from_json(request)
        guard = self.harness.guard
        tokens, usd = guard.reservation(
            model.name,
            prompts.estimated_tokens(call.messages) + len(call.system) // 4,
            call.max_tokens,
        )
        try:
            await guard.check(task_id, exclude_key=key, tokens=tokens, usd=usd)
        except BudgetStop as stop:
            return await self.harness.stop_for_budget(task_id, stop.spent)
        await self.ledger.start_effect(
            key,
            task_id,
            item_id,
            attempt,
            "model",
            reserve=Charge(kind="reservation", tokens=tokens, usd=usd),
        )
        response = await model.complete(call)
        usage = response.usage
        await self.ledger.complete_effect(
            key,
            task_id=task_id,
            item_id=item_id,
            attempt=attempt,
            step="model",
            result=response.as_json(),
            model_call=ModelCall(
                purpose=purpose,
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
                usd=guard.cost(response.model, usage),
            ),
        )
        return response.as_json()

    # ---- planning -----------------------------------------------------------------------

    async def planning_request(self, task_id: str) -> JSON:
        goal = await self._goal(task_id)
        return ModelRequest(
            system=prompts.PLANNER_SYSTEM,
            messages=prompts.planning_messages(goal),
            tools=[prompts.SUBMIT_PLAN],
            max_tokens=self.config.max_tokens,
            force_tool=prompts.SUBMIT_PLAN.name,
        ).as_json()

    async def _goal(self, task_id: str) -> str:
        goal = await self.store.task_goal(task_id)
        if goal is None:
            raise NotFound(task_id)
        return goal

    async def accept_plan(self, task_id: str, attempt: int, plan: Any) -> JSON:
        """Validate the model's plan; store it, or say what is wrong so the model can fix it."""
        try:
            parsed = parse_plan(plan, self.config.plan_limits)
        except PlanError as exc:
            return {"ok": False, "errors": str(exc)}
        summary = ", ".join(i.item_id for i in parsed.items)
        state = await self.harness.record(
            task_id,
            StepRecord(
                effect_key=f"{task_id}:plan:{attempt}:accept",
                step="accept_plan",
                result={},
                new_items=parsed.items,
                task_state="working",
                status_text=f"Planned {len(parsed.items)} item(s): {summary}",
                transitions=[
                    Transition(
                        to_state="working",
                        reason=f"plan accepted: {len(parsed.items)} item(s): {summary}",
                    )
                ],
            ),
        )
        return {"ok": True, "errors": "", "stopped": state in TERMINAL_STATES}

    # ---- working an item ----------------------------------------------------------------

    async def item_request(self, task_id: str, item_id: str, attempt: int) -> JSON:
        items = await self.store.get_items(task_id)
        item = next((i for i in items if i.item_id == item_id), None)
        if item is None:
            raise NotFound(f"{task_id}/{item_id}")
        progress = self.harness.workspace(task_id).root / "progress.md"
        tail = progress.read_text()[-PROGRESS_TAIL_CHARS:] if progress.exists() else ""
        last_failure = item.evidence if item.failures else None
        messages = prompts.item_messages(
            goal=await self._goal(task_id),
            items=items,
            item=item,
            attempt=attempt,
            progress_tail=tail,
            last_failure=last_failure,
        )
        request = ModelRequest(
            system=prompts.WORKER_SYSTEM,
            messages=messages,
            tools=TOOL_SPECS,
            max_tokens=self.config.max_tokens,
        )
        return {
            "request": request.as_json(),
            "compact_at": self.config.compact_at_tokens,
            "max_turns": self.config.max_turns,
        }

    async def call_tool(
        self, task_id: str, item_id: str, attempt: int, n: str, tool_use: JSON
    ) -> JSON:
        """One tool call as a keyed effect, checked against the action budget first."""
        key = idempotency_key(task_id, item_id, attempt, f"tool.{n}")
        effect = await self.ledger.get_effect(key)
        if effect is not None and effect.status == "completed" and effect.result is not None:
            return {"outcome": "ok", "result": effect.result}
        name = str(tool_use.get("name"))
        try:
            await self.harness.guard.check(task_id, exclude_key=key, tool=name)
        except BudgetStop as stop:
            return await self.harness.stop_for_budget(task_id, stop.spent)
        restored = await self.harness.check_checkpoint_present(task_id)
        if restored:
            item = await self.harness.item(task_id, item_id)
            return await self.harness.restart(task_id, item, attempt, restored)
        await self.ledger.start_effect(key, task_id, item_id, attempt, "tool")
        ws = self.harness.workspace(task_id)
        tools = WorkspaceTools(
            root=ws.root,
            env=self.harness.command_env(task_id, item_id, attempt, key, ws.root),
            output_bytes=self.config.tool_output_bytes,
            max_timeout_s=self.config.bash_timeout_s,
            pid_file=ws.command_pid_file,
        )
        outcome = await tools.call(name, tool_use.get("input") or {})
        result = {"tool_use_id": tool_use["id"], **outcome.as_json()}
        await self.ledger.complete_effect(
            key,
            task_id=task_id,
            item_id=item_id,
            attempt=attempt,
            step="tool",
            result=result,
            charge=Charge(kind="tool", tool=name, actions=1),
        )
        return {"outcome": "ok", "result": result}

    async def end_turn(self, task_id: str, item_id: str, attempt: int, note: str) -> JSON:
        """The model stopped calling tools: record its progress note, then verification."""
        item = await self.harness.item(task_id, item_id)
        note = " ".join(note.split())[:500] or "(no note)"
        state = await self.harness.record(
            task_id,
            StepRecord(
                effect_key=idempotency_key(task_id, item_id, attempt, "end_turn"),
                step="end_turn",
                result={},
                item=ItemChange(item_id=item_id, status="verifying", attempts=attempt),
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=attempt,
                        from_state="in_progress",
                        to_state="verifying",
                        reason=f"model: {note}; verifying with `{item.verify_command}`",
                    )
                ],
            ),
        )
        return {"outcome": "stopped" if state in TERMINAL_STATES else "verify", "attempt": attempt}
