"""The model's part of a run's workflow body: planning until the harness accepts a plan, and
an item's turns of tool use (compacting the context when it grows). Plain methods of the
body, mixed into `PlanRunner`: every call they make is one of its steps, so a replay
rebuilds the same messages from the steps' recorded results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol

from a2a_agent.engine.control import RunStopped
from a2a_agent.harness.kernel.keys import PLAN_SCOPE, effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.model import prompts
from a2a_agent.harness.model.model_work import ModelWork
from a2a_agent.model.types import ModelResponse, Usage, assistant, tool_results, user_text

P = ParamSpec("P")


class _Steps(Protocol):
    """The steps of `PlanRunner` the model's part calls."""

    work: ModelWork

    async def _step(
        self, step: Callable[P, Awaitable[JSON]], *args: P.args, **kwargs: P.kwargs
    ) -> StepResult: ...
    async def _call(
        self, step: Callable[P, Awaitable[JSON]], *args: P.args, **kwargs: P.kwargs
    ) -> JSON: ...
    async def call_model(self, task_id: str, call: JSON) -> JSON: ...
    async def planning_request(self, task_id: str) -> JSON: ...
    async def accept_plan(self, task_id: str, attempt: int, plan: Any) -> JSON: ...
    async def fail(self, task_id: str, reason: str) -> JSON: ...
    async def item_request(self, task_id: str, item_id: str, attempt: int) -> JSON: ...
    async def call_tool(
        self, task_id: str, item_id: str, attempt: int, use: JSON, tool_use: JSON
    ) -> JSON: ...
    async def end_turn(self, task_id: str, item_id: str, attempt: int, note: str) -> JSON: ...
    async def _compact(
        self,
        task_id: str,
        item_id: str,
        attempt: int,
        *,
        turn: int,
        request: JSON,
        messages: list[JSON],
    ) -> list[JSON]: ...


class ModelTurns:
    async def _plan(self: _Steps, task_id: str) -> None:
        """Ask the model for a plan until one is valid (the harness checks, not the model)."""
        request = (await self._step(self.planning_request, task_id)).payload
        messages: list[JSON] = list(request["messages"])
        tries = self.work.config.plan_tries
        problem = ""
        for n in range(1, tries + 1):
            call = {
                "key": effect_key(task_id, "model", scope=PLAN_SCOPE, attempt=n),
                "purpose": "plan",
                "item_id": None,
                "attempt": n,
                "turn": 0,
                "request": {**request, "messages": messages},
            }
            response = ModelResponse.from_json(
                (await self._step(self.call_model, task_id, call)).payload
            )
            uses = [u for u in response.tool_uses if u.get("name") == "submit_plan"]
            if not uses:
                problem = "no plan was submitted"
                messages = [
                    *messages,
                    assistant(response),
                    user_text("Submit the plan with the submit_plan tool."),
                ]
                continue
            accepted = await self._step(self.accept_plan, task_id, n, uses[0].get("input"))
            if accepted.outcome == "ok":
                return
            problem = str(accepted.payload["errors"])
            messages = [
                *messages,
                assistant(response),
                tool_results(
                    [
                        {
                            "tool_use_id": uses[0]["id"],
                            "is_error": True,
                            "content": f"The plan was not accepted: {problem}. "
                            "Fix it and submit again.",
                        },
                    ]
                ),
            ]
        await self._call(
            self.fail,
            task_id,
            f"the model did not produce a valid plan in {tries} tries; last problem: {problem}",
        )
        raise RunStopped

    async def _model_turn(self: _Steps, task_id: str, item_id: str, attempt: int) -> None:
        """The model works the item with tools until it stops calling them."""
        context = (await self._step(self.item_request, task_id, item_id, attempt)).payload
        request: JSON = context["request"]
        messages: list[JSON] = list(request["messages"])
        note = "the turn limit was reached"
        notes_seq = int(context.get("notes_seq", 0))  # the caller's notes the model has read
        seen = 0  # what the last call read and wrote: the next one reads at least as much
        for turn in range(int(context["max_turns"])):
            call = {
                "key": effect_key(task_id, f"model.{turn}", scope=item_id, attempt=attempt),
                "purpose": "work",
                "item_id": item_id,
                "attempt": attempt,
                "turn": turn,
                "context_tokens": seen,
                "request": {**request, "messages": messages},
            }
            response = ModelResponse.from_json(
                (await self._step(self.call_model, task_id, call)).payload
            )
            messages = [*messages, assistant(response)]
            if not response.tool_uses:
                note = response.text
                break
            results = []
            uses = len(response.tool_uses)
            for n, tool_use in enumerate(response.tool_uses):
                use = {"turn": turn, "n": n, "uses": uses, "notes_seq": notes_seq}
                called = await self._step(self.call_tool, task_id, item_id, attempt, use, tool_use)
                results.append(called.payload)
                notes_seq = int(called.payload.get("notes_seq", notes_seq))
            messages = [*messages, tool_results(results)]
            seen = _context_size(response.usage, messages)
            if seen > int(context["compact_at"]):
                messages = await self._compact(
                    task_id, item_id, attempt, turn=turn, request=request, messages=messages
                )
                seen = 0
        await self._step(self.end_turn, task_id, item_id, attempt, note)

    async def _compact(
        self: _Steps,
        task_id: str,
        item_id: str,
        attempt: int,
        *,
        turn: int,
        request: JSON,
        messages: list[JSON],
    ) -> list[JSON]:
        call = {
            "key": effect_key(task_id, f"compact.{turn}", scope=item_id, attempt=attempt),
            "purpose": "compact",
            "item_id": item_id,
            "attempt": attempt,
            "turn": turn,
            "request": {
                **request,
                "system": prompts.COMPACT_SYSTEM,
                "tools": [],
                "messages": prompts.compaction_messages(messages),
            },
        }
        summary = ModelResponse.from_json(
            (await self._step(self.call_model, task_id, call)).payload
        )
        return prompts.compacted(messages, summary.text)


def _context_size(usage: Usage, messages: list[JSON]) -> int:
    """What the next call will read: this call's context, its answer and the tool results."""
    return usage.context_tokens + usage.output_tokens + prompts.estimated_tokens(messages[-1:])
