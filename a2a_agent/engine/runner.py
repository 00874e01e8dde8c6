"""The workflow of a run and its steps (DBOS). The body decides only from step outputs.

Each step is a thin wrapper over one harness coroutine: durability is added here, by
wrapping, and the harness itself never branches on whether it runs for the first time.
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS, DBOSConfiguredInstance

from a2a_agent.engine.gate import StepGate
from a2a_agent.harness import prompts
from a2a_agent.harness.model_work import ModelWork
from a2a_agent.harness.plan_harness import PlanHarness, idempotency_key
from a2a_agent.model.types import ModelResponse, Usage, assistant, tool_results, user_text
from persistence.errors import StoreUnavailable
from persistence.records import TERMINAL_STATES

JSON = dict[str, Any]


def _database_outage(exc: BaseException) -> bool:
    return isinstance(exc, StoreUnavailable)


# Steps retry only while the database is unreachable (about four minutes in all); any other
# error is a real failure of the step and ends the run with its reason.
OUTAGE_RETRY: dict[str, Any] = {
    "retries_allowed": True,
    "max_attempts": 12,
    "interval_seconds": 1.0,
    "backoff_rate": 1.5,
    "should_retry": _database_outage,
}


@DBOS.dbos_class()
class PlanRunner(DBOSConfiguredInstance):
    def __init__(self, harness: PlanHarness, work: ModelWork, gate: StepGate) -> None:
        self.harness = harness
        self.work = work
        self.gate = gate
        super().__init__("plan-runner")

    # ---- steps: plans and commands ----------------------------------------------------------

    @DBOS.step(**OUTAGE_RETRY)
    async def snapshot(self, task_id: str) -> JSON:
        async with self.gate.step():
            return await self.harness.snapshot(task_id)

    @DBOS.step(**OUTAGE_RETRY)
    async def begin_task(self, task_id: str) -> JSON:
        async with self.gate.step():
            return await self.harness.begin_task(task_id)

    @DBOS.step(**OUTAGE_RETRY)
    async def begin_attempt(self, task_id: str, item_id: str, attempt: int) -> JSON:
        async with self.gate.step():
            return await self.harness.begin_attempt(task_id, item_id, attempt)

    # Preemptible: a cancel interrupts the running command instead of waiting for it; the
    # interrupted step's output is not recorded, so a resume re-runs it under the same key.
    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def run_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        async with self.gate.step():
            return await self.harness.run_item(task_id, item_id, attempt)

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        async with self.gate.step():
            return await self.harness.verify_item(task_id, item_id, attempt)

    @DBOS.step(**OUTAGE_RETRY)
    async def finish(self, task_id: str) -> JSON:
        async with self.gate.step():
            return await self.harness.finish(task_id)

    @DBOS.step(**OUTAGE_RETRY)
    async def fail(self, task_id: str, reason: str) -> JSON:
        async with self.gate.step():
            return await self.harness.fail(task_id, reason)

    # ---- steps: the model ---------------------------------------------------------------

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def call_model(self, task_id: str, call: JSON) -> JSON:
        """`call`: key, purpose, item_id, attempt, request."""
        async with self.gate.step():
            return await self.work.call_model(
                task_id,
                key=call["key"],
                purpose=call["purpose"],
                item_id=call["item_id"],
                attempt=call["attempt"],
                request=call["request"],
            )

    @DBOS.step(**OUTAGE_RETRY)
    async def planning_request(self, task_id: str) -> JSON:
        async with self.gate.step():
            return await self.work.planning_request(task_id)

    @DBOS.step(**OUTAGE_RETRY)
    async def accept_plan(self, task_id: str, attempt: int, plan: Any) -> JSON:
        async with self.gate.step():
            return await self.work.accept_plan(task_id, attempt, plan)

    @DBOS.step(**OUTAGE_RETRY)
    async def item_request(self, task_id: str, item_id: str, attempt: int) -> JSON:
        async with self.gate.step():
            return await self.work.item_request(task_id, item_id, attempt)

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def call_tool(
        self, task_id: str, item_id: str, attempt: int, n: str, tool_use: JSON
    ) -> JSON:
        async with self.gate.step():
            return await self.work.call_tool(task_id, item_id, attempt, n, tool_use)

    @DBOS.step(**OUTAGE_RETRY)
    async def end_turn(self, task_id: str, item_id: str, attempt: int, note: str) -> JSON:
        async with self.gate.step():
            return await self.work.end_turn(task_id, item_id, attempt, note)

    # ---- the workflow -------------------------------------------------------------------

    @DBOS.workflow()
    async def run_task(self, task_id: str) -> str:
        try:
            return await self._run(task_id)
        except Exception as exc:  # noqa: BLE001  (recorded on the task, not swallowed)
            # The run cannot go on; say so on the task instead of leaving it working forever.
            # Cancellation is a BaseException (DBOS's and asyncio's) and passes through.
            await self.fail(task_id, f"{type(exc).__name__}: {exc}")
            return "failed"

    async def _run(self, task_id: str) -> str:
        snap = await self.snapshot(task_id)
        if snap["state"] in TERMINAL_STATES:
            return str(snap["state"])
        if snap["state"] == "submitted" and (await self.begin_task(task_id))["stopped"]:
            return "stopped"
        if not snap["items"]:
            planned = await self._plan(task_id)
            if planned != "planned":
                return planned
            snap = await self.snapshot(task_id)
        for item in snap["items"]:
            outcome = await self._work_item(task_id, item, int(item["attempts"]))
            if outcome != "done":
                return outcome
        return str((await self.finish(task_id))["state"])

    async def _plan(self, task_id: str) -> str:
        """Ask the model for a plan until one is valid (the harness checks, not the model)."""
        request = await self.planning_request(task_id)
        messages: list[JSON] = list(request["messages"])
        tries = self.work.config.plan_tries
        problem = ""
        for n in range(1, tries + 1):
            call = {
                "key": f"{task_id}:plan:{n}:model",
                "purpose": "plan",
                "item_id": None,
                "attempt": n,
                "request": {**request, "messages": messages},
            }
            raw = await self.call_model(task_id, call)
            if raw.get("stopped"):
                return "stopped"
            response = ModelResponse.from_json(raw)
            uses = [u for u in response.tool_uses if u.get("name") == "submit_plan"]
            if not uses:
                problem = "no plan was submitted"
                messages = [
                    *messages,
                    assistant(response),
                    user_text("Submit the plan with the submit_plan tool."),
                ]
                continue
            accepted = await self.accept_plan(task_id, n, uses[0].get("input"))
            if accepted["ok"]:
                return "stopped" if accepted.get("stopped") else "planned"
            problem = str(accepted["errors"])
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
        await self.fail(
            task_id,
            f"the model did not produce a valid plan in {tries} tries; last problem: {problem}",
        )
        return "failed"

    async def _work_item(self, task_id: str, item: JSON, attempt: int) -> str:
        item_id, status = str(item["id"]), str(item["status"])
        if status in ("done", "failed"):
            return status
        if status == "pending":
            attempt += 1
            if (await self.begin_attempt(task_id, item_id, attempt))["stopped"]:
                return "stopped"
        while True:
            if status != "verifying":
                if item["run"]:
                    ran = await self.run_item(task_id, item_id, attempt)
                else:
                    ran = await self._model_turn(task_id, item_id, attempt)
                if ran["outcome"] == "stopped":
                    return "stopped"
                if ran["outcome"] == "restart":
                    attempt = int(ran["attempt"])
                    continue
            status = "in_progress"
            verified = await self.verify_item(task_id, item_id, attempt)
            if verified["outcome"] in ("retry", "restart"):
                attempt = int(verified["attempt"])
                continue
            return str(verified["outcome"])

    async def _model_turn(self, task_id: str, item_id: str, attempt: int) -> JSON:
        """The model works the item with tools until it stops calling them."""
        context = await self.item_request(task_id, item_id, attempt)
        request: JSON = context["request"]
        messages: list[JSON] = list(request["messages"])
        note = "the turn limit was reached"
        for turn in range(int(context["max_turns"])):
            key = idempotency_key(task_id, item_id, attempt, f"model.{turn}")
            call = {
                "key": key,
                "purpose": "work",
                "item_id": item_id,
                "attempt": attempt,
                "request": {**request, "messages": messages},
            }
            raw = await self.call_model(task_id, call)
            if raw.get("stopped"):
                return raw
            response = ModelResponse.from_json(raw)
            messages = [*messages, assistant(response)]
            if not response.tool_uses:
                note = response.text
                break
            results = []
            for n, use in enumerate(response.tool_uses):
                called = await self.call_tool(task_id, item_id, attempt, f"{turn}.{n}", use)
                if called["outcome"] != "ok":
                    return called
                results.append(called["result"])
            messages = [*messages, tool_results(results)]
            if _context_size(response.usage, messages) > int(context["compact_at"]):
                compacted = await self._compact(
                    task_id, item_id, attempt, turn=turn, request=request, messages=messages
                )
                if compacted is None:
                    return {"outcome": "stopped", "attempt": attempt}
                messages = compacted
        return await self.end_turn(task_id, item_id, attempt, note)

    async def _compact(
        self,
        task_id: str,
        item_id: str,
        attempt: int,
        *,
        turn: int,
        request: JSON,
        messages: list[JSON],
    ) -> list[JSON] | None:
        key = idempotency_key(task_id, item_id, attempt, f"compact.{turn}")
        call = {
            "key": key,
            "purpose": "compact",
            "item_id": item_id,
            "attempt": attempt,
            "request": {
                **request,
                "system": prompts.COMPACT_SYSTEM,
                "tools": [],
                "messages": prompts.compaction_messages(messages),
            },
        }
        raw = await self.call_model(task_id, call)
        if raw.get("stopped"):
            return None  # the budget stopped the run
        summary = ModelResponse.from_json(raw)
        return prompts.compacted(messages, summary.text)


def _context_size(usage: Usage, messages: list[JSON]) -> int:
    """What the next call will read: this call's context, its answer and the tool results."""
    return usage.context_tokens + usage.output_tokens + prompts.estimated_tokens(messages[-1:])
