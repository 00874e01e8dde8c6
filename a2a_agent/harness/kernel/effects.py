"""One keyed effect: the sequence every command, tool call and model call goes through.

    key recorded as completed?  -> conclude from the recorded result (nothing runs again)
    else: workspace check       -> restored? restart the item as a new attempt
          approval check        -> undecided? pause (the task waits; see pauses.py)
          budget check          -> exhausted? stop the run cleanly
          mark started          -> a local marker; on record only for a re-run after a crash
          perform               -> the effect itself
    conclude -> one StepRecord  -> one transaction: result, runs, charge, transitions, events

The `started` row of an effect the harness can foresee is written by the step before it
(`StepRecord.then`), so the normal path costs one commit per step. Whether an effect already
ran here is known from a small marker beside the workspace, written before it starts: a run
found there is a crash re-run, counted and put on record before it starts again.
"""

from __future__ import annotations

import asyncio
import json
from asyncio import FIRST_COMPLETED
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from a2a_agent.budget import BudgetStop, Spend
from a2a_agent.harness.kernel.context import StepContext, ended_by_others
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.fact_checks import as_fact, run_checks
from a2a_agent.harness.kernel.pauses import Pauses, asked_here, decided_to_go_on
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.files import overwrite
from persistence.errors import StoreUnavailable
from persistence.records import (
    TERMINAL_STATES,
    Decision,
    Fact,
    PauseRequest,
    StepRecord,
    StepView,
    Transition,
)
from persistence.steps import keep_waiting

Integrity = Literal["tree", "checkpoint", "none"]
ENDED_POLL_S = 5.0  # how often a running effect looks whether its task ended, unwoken


def recorded(view: StepView) -> bool:
    """The step's effect completed before (a replay): it runs no more, whatever the time."""
    return view.effect is not None and view.effect.status == "completed"


@dataclass(frozen=True)
class Effect:
    key: str
    step: str  # run | verify | tool | model
    item_id: str | None
    attempt: int | None
    spend: Spend
    # tree: the workspace must be as the last step recorded it (commands); checkpoint: only
    # present (between the model's tool calls); none: the effect does not touch it (model).
    integrity: Integrity
    action: str | None = None  # the command it runs, for the irreversible patterns
    # The result to conclude with when a person refused the effect (a tool call: an error the
    # model reads); None: a refusal ends the run (applied before the effect is reached).
    refused: Callable[[Decision], JSON] | None = None
    # Effects that run side by side (re-verification) each keep their own marker and pid file.
    lane: int = 0
    # A request a person must decide before the effect runs (publishing), besides those the
    # pauses find for every effect (irreversible items and commands, the budget's pause point).
    ask: PauseRequest | None = None


@dataclass(frozen=True)
class Concluded:
    """What an effect's result means: the record to write and the step's result."""

    record: StepRecord
    result: StepResult
    fingerprint: bool = True


class EffectMarker:
    """The effect a task last began on this machine, and which run of it that was."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def runs_of(self, key: str) -> int:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return 0
        return int(data.get("runs", 0)) if data.get("key") == key else 0

    def key(self) -> str | None:
        """The key of the effect last begun here."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return str(data["key"]) if isinstance(data, dict) and "key" in data else None

    def begin(self, key: str, runs: int) -> None:
        # Written before the effect starts; a few bytes on local disk (a kill -9 keeps them).
        self.path.parent.mkdir(parents=True, exist_ok=True)
        overwrite(self.path, json.dumps({"key": key, "runs": runs}))


def rerun_note(view: StepView, effect: Effect, runs: int) -> Transition:
    """The transition that says an effect runs again after a crash (a state that stays)."""
    step = effect.key.rsplit(":", 1)[-1]
    if effect.item_id is None:
        return Transition(
            from_state=view.state,
            to_state=view.state,
            reason=f"`{step}` re-ran after the worker was lost; run {runs} of this step",
        )
    status = view.item(effect.item_id).status
    return Transition(
        item_id=effect.item_id,
        attempt=effect.attempt,
        from_state=status,
        to_state=status,
        reason=f"`{step}` of item `{effect.item_id}` re-ran after the worker was lost; "
        f"run {runs} of this step",
    )


class Wakeups(Protocol):
    """Wakes a waiter whenever a task may have changed (the notifier: LISTEN/NOTIFY)."""

    def watch(self, task_id: str) -> AbstractAsyncContextManager[asyncio.Event]: ...
    def quiet_since(self, task_id: str, since: float) -> bool:
        """Whether no change of the task since `since` (time.monotonic()) can have gone
        unheard; False when it cannot say."""
        ...


class Effects:
    def __init__(
        self, ctx: StepContext, endings: RunEndings, wakeups: Wakeups, pauses: Pauses
    ) -> None:
        self.ctx = ctx
        self.endings = endings
        self.wakeups = wakeups
        self.pauses = pauses

    def marker(self, task_id: str, lane: int = 0) -> EffectMarker:
        return EffectMarker(self.ctx.marker_path(task_id, lane))

    async def run(
        self,
        view: StepView,
        effect: Effect,
        perform: Callable[[], Awaitable[JSON]],
        conclude: Callable[[JSON, int], Awaitable[Concluded]],
    ) -> StepResult:
        """Perform `effect` at most once per key (re-run only when a crash cut it short) and
        record what `conclude` makes of its result. `view` was read with the effect's key
        and, unless the effect spends nothing, with the budget."""
        # The last step's result is kept before an effect runs (a step that read its view
        # first has kept it with that read: nothing waits then).
        await keep_waiting()
        recorded = view.effect
        marker = self.marker(view.task_id, effect.lane)
        if recorded is not None and recorded.status == "completed" and recorded.result is not None:
            value, runs = recorded.result, recorded.runs
        elif view.is_terminal:
            return StepResult("stopped", effect.attempt or 0)  # ended before it began
        else:
            ran_before = max(marker.runs_of(effect.key), recorded.runs if recorded else 0)
            if effect.integrity != "none":
                restored = await self.ctx.check_workspace(
                    view, in_flight=ran_before > 0, compare_tree=effect.integrity == "tree"
                )
                if restored and effect.item_id is not None and effect.attempt is not None:
                    item = view.item(effect.item_id)
                    return await self.ctx.restart(view, item, effect.attempt, restored)
            asked = effect.ask or self.pauses.before_effect(
                view,
                key=effect.key,
                item_id=effect.item_id,
                attempt=effect.attempt,
                action=effect.action,
                spends=effect.spend != Spend(),
            )
            if asked is not None and asked.kind == "irreversible_action":
                stale = [fact for fact in view.facts if fact.stale]
                if stale:
                    changed = await self._recheck(view, effect, stale)
                    if changed is not None:
                        return changed
            decided = view.decisions.get(asked.id) if asked is not None else None
            if asked is not None and decided is None:
                return await self.pauses.ask(view, asked, effect.attempt or 0)
            if decided is not None and asked_here(decided):
                return StepResult("paused", effect.attempt or 0)
            if asked is not None and decided is not None and not decided_to_go_on(decided):
                if effect.refused is None:
                    await self.endings.fail(
                        view, f"`{asked.id}` was {decided.decision}", decided=decided
                    )
                    return StepResult("stopped", effect.attempt or 0)
                concluded = await conclude(effect.refused(decided), 1)
                await self.ctx.record(view, concluded.record, fingerprint=concluded.fingerprint)
                return concluded.result
            try:
                await self.ctx.guard.check(view.task_id, view.budget or {}, effect.spend)
            except BudgetStop as stop:
                return await self.endings.budget_stop(view, stop.spent)
            runs = ran_before + 1
            if ran_before:
                await self.ctx.ledger.start_effect(
                    effect.key,
                    view.task_id,
                    effect.item_id,
                    effect.attempt,
                    effect.step,
                    runs=runs,
                    note=rerun_note(view, effect, runs),
                )
            marker.begin(effect.key, runs)
            performed = await self._unless_ended(view.task_id, perform, view.asked_at)
            if performed is None:
                return StepResult("stopped", effect.attempt or 0)  # canceled while it ran
            value = performed
        concluded = await conclude(value, runs)
        outcome = await self.ctx.record(view, concluded.record, fingerprint=concluded.fingerprint)
        if ended_by_others(concluded.record, outcome):
            return StepResult("stopped", effect.attempt or 0)
        return concluded.result

    async def _recheck(
        self, view: StepView, effect: Effect, stale: list[Fact]
    ) -> StepResult | None:
        """Check stale facts again before an irreversible effect: None if none changed (their
        times are renewed); else the run waits for a person (`stale_fact`)."""
        key = f"{effect.key}:recheck.s{view.segment}"
        checks = [
            {"key": f.key, "check": f.check, "max_age_s": f.max_age_s, "source": f.source}
            for f in stale
        ]
        found = await run_checks(
            self.ctx,
            view.task_id,
            effect.item_id or "",
            effect.attempt or 0,
            key=key,
            checks=checks,
        )
        old = {f.key: f for f in stale}
        changed = [
            c for c in found if c["exit_code"] != 0 or c["value"] != old[str(c["key"])].value
        ]
        if not changed:
            record = StepRecord(
                effect_key=key,
                step="recheck",
                result={"checks": found},
                facts=[as_fact(c, str(c["source"])) for c in found],
            )
            await self.ctx.record(view, record, fingerprint=False)
            return None
        step = effect.key.rsplit(":", 1)[-1]
        scope = f"{effect.item_id}.{effect.attempt}.{step}" if effect.item_id else step
        shown = [
            {
                "key": c["key"],
                "old": old[str(c["key"])].value,
                "new": c["value"],
                "exit_code": c["exit_code"],
                "check": c["check"],
                "source": c["source"],
                "max_age_s": c["max_age_s"],
            }
            for c in changed
        ]
        what = "; ".join(
            f"`{c['key']}` was {c['old'][:80]!r}, now "
            + (
                f"{c['new'][:80]!r}"
                if c["exit_code"] == 0
                else f"its check fails ({c['exit_code']})"
            )
            for c in shown
        )
        request = self.pauses.request(
            view,
            pause_id=f"stale.{scope}.s{view.segment}",
            kind="stale_fact",
            summary=f"Before an irreversible step, facts changed: {what}. Approve to go on "
            "with the new values, or reject to stop.",
            details={"facts": shown},
            item_id=effect.item_id,
            attempt=effect.attempt,
        )
        return await self.pauses.ask(view, request, effect.attempt or 0)

    async def _ended(self, task_id: str) -> bool:
        try:
            return await self.ctx.runs.state_of(task_id) in TERMINAL_STATES
        except StoreUnavailable:
            return False  # a database outage ends nothing: the effect goes on

    async def _unless_ended(
        self, task_id: str, perform: Callable[[], Awaitable[JSON]], read: float = 0.0
    ) -> JSON | None:
        """`perform()`, stopped (its command killed, its request dropped) if the task ends
        meanwhile: a cancel, the watchdog. Woken by the task's NOTIFY, and every
        ENDED_POLL_S without one. None if it was stopped. `read`: when the step asked for
        the task as it found it (`StepView.asked_at`)."""
        async with self.ctx.config.step_slots.aside():  # others step while this one waits
            return await self._watched(task_id, perform, read)

    async def _watched(
        self, task_id: str, perform: Callable[[], Awaitable[JSON]], read: float
    ) -> JSON | None:
        work = asyncio.ensure_future(perform())
        try:
            async with self.wakeups.watch(task_id) as wake:
                # The first look catches a cancel made between the step's read of the task
                # and this watch (its NOTIFY went to no one). None is needed when nothing
                # of the task was heard since that read (a round trip a step, most steps):
                # a NOTIFY still on its way comes to this watch, now registered.
                look = not self.wakeups.quiet_since(task_id, read)
                while not work.done():
                    # Cleared before the look: a NOTIFY during it wakes the wait below.
                    wake.clear()
                    if look and await self._ended(task_id) and not work.done():
                        work.cancel()
                        await asyncio.wait({work})  # its cleanup (the command's kill) runs
                        return None
                    look = True
                    waiter = asyncio.ensure_future(wake.wait())
                    try:
                        await asyncio.wait(
                            {work, waiter}, timeout=ENDED_POLL_S, return_when=FIRST_COMPLETED
                        )
                    finally:
                        waiter.cancel()
            return work.result()
        finally:
            if not work.done():  # we were cancelled ourselves: so is the effect
                work.cancel()
