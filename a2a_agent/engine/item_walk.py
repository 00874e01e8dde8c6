"""The plan's part of a run's workflow body: its items worked in order, each from its
pre-check through its attempts to its verification, and the re-verification rounds between
and after them. Plain methods of the body, mixed into `PlanRunner` (as `ModelTurns` is):
every call they make is one of its steps, so a replay takes the same path from the steps'
recorded results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, Protocol

from a2a_agent.engine.control import ItemRestart, Rounds
from a2a_agent.harness.kernel.results import JSON, StepResult

P = ParamSpec("P")


class _Steps(Protocol):
    """The steps of `PlanRunner` the walk calls."""

    async def _step(
        self, step: Callable[P, Awaitable[JSON]], *args: P.args, **kwargs: P.kwargs
    ) -> StepResult: ...
    async def _model_turn(self, task_id: str, item_id: str, attempt: int) -> None: ...
    async def _work_item(
        self, task_id: str, item: JSON, attempt: int, *, precheck: bool = True, lean: bool = False
    ) -> str: ...
    async def _reverified(self, task_id: str, rounds: Rounds) -> str: ...
    async def reverify(self, task_id: str, round_id: str) -> JSON: ...
    async def precheck_item(self, task_id: str, item_id: str) -> JSON: ...
    async def begin_attempt(
        self, task_id: str, item_id: str, attempt: int, precheck_skipped: bool = False
    ) -> JSON: ...
    async def ask_item(self, task_id: str, item_id: str, attempt: int) -> JSON: ...
    async def delegate_item(self, task_id: str, item_id: str, attempt: int) -> JSON: ...
    async def run_item(self, task_id: str, item_id: str, attempt: int) -> JSON: ...
    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> JSON: ...
    async def establish_facts(self, task_id: str, item_id: str, attempt: int) -> JSON: ...


class ItemWalk:
    async def _walk(
        self: _Steps,
        task_id: str,
        snap: JSON,
        rounds: Rounds | None,
        prechecks: bool,
        *,
        lean: bool,
    ) -> str:
        """Work the plan's items in order: `walked` once each has an outcome, `reopened` if
        a re-verification round reopened one, else how the run ended."""
        every = int(snap.get("reverify_every") or 0)
        done = sum(1 for i in snap["items"] if i["status"] == "done")
        for item in snap["items"]:
            was = item["status"]
            outcome = await self._work_item(
                task_id, item, int(item["attempts"]), precheck=prechecks, lean=lean
            )
            if outcome not in ("done", "skipped"):
                return outcome
            if outcome == "done" and was != "done":
                done += 1
                if rounds is not None and every and done % every == 0:
                    checked = await self._reverified(task_id, rounds)
                    if checked != "walked":
                        return checked
        return "walked"

    async def _reverified(self: _Steps, task_id: str, rounds: Rounds) -> str:
        """A re-verification round: `walked` if every done item's check still passes,
        `reopened` if the policy reopened the ones that do not, else the run ended."""
        checked = await self._step(self.reverify, task_id, rounds.next())
        if checked.outcome == "retry":
            return "reopened"
        return "walked" if checked.outcome == "ok" else checked.outcome

    async def _work_item(
        self: _Steps,
        task_id: str,
        item: JSON,
        attempt: int,
        *,
        precheck: bool = True,
        lean: bool = False,
    ) -> str:
        item_id, status = str(item["id"]), str(item["status"])
        if status in ("done", "failed", "skipped"):
            return status
        noted = False  # the pre-check's "skipped" goes into the first begin_attempt's record
        if precheck and status == "pending" and attempt == 0 and lean:
            noted = not item.get("precheck", True)
        if precheck and status == "pending" and attempt == 0 and not noted:
            try:
                checked = await self._step(self.precheck_item, task_id, item_id)
            except ItemRestart:
                pass  # the workspace was restored first: the item starts as it would have
            else:
                if checked.outcome == "failed":
                    return "failed"
        if status == "pending":
            attempt += 1
            await self._step(self.begin_attempt, task_id, item_id, attempt, noted)
        verifying = status == "verifying"
        if item.get("ask") and not verifying:
            await self._step(self.ask_item, task_id, item_id, attempt)  # the answer moves it on
            verifying = True
        while True:
            try:
                if not verifying:
                    if item.get("delegate"):
                        await self._step(self.delegate_item, task_id, item_id, attempt)
                    elif item["run"]:
                        await self._step(self.run_item, task_id, item_id, attempt)
                    else:
                        await self._model_turn(task_id, item_id, attempt)
                verifying = False
                verified = await self._step(self.verify_item, task_id, item_id, attempt)
            except ItemRestart as restart:
                attempt, verifying = restart.attempt, False
                continue
            if verified.outcome == "retry":
                attempt = verified.attempt
                continue
            if verified.outcome == "ok":
                return "skipped"  # out of attempts; the policy skips it
            if verified.outcome == "done" and item.get("facts"):
                await self._step(self.establish_facts, task_id, item_id, verified.attempt)
            return verified.outcome
