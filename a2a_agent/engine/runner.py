"""The workflow of a run and its steps (DBOS). The body decides only from step results.

Each step is a thin wrapper over one harness coroutine: durability is added here, by
wrapping, and the harness itself never branches on whether it runs for the first time. A
step's result is kept by the step journal (`journal.py`, our table), or, in runs begun
before it, by DBOS as the step's record (the `@DBOS.step` methods below, which those runs
replay by name); `_call` picks which.
Every step returns a `StepResult`; `_step` is the one funnel the body takes them through:
`stopped` ends the run, `paused` ends this workflow segment (the task waits for a person, as
a row; the reply starts the next segment) and `restart` starts the item again, whichever step
said it.
"""

from __future__ import annotations

import inspect
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec

from dbos import DBOS, DBOSConfiguredInstance

from a2a_agent.engine.control import (
    OUTAGE_RETRY,
    ItemRestart,
    Rounds,
    RunPaused,
    RunStopped,
    plan_check,
)
from a2a_agent.engine.gate import StepGate
from a2a_agent.engine.item_walk import ItemWalk
from a2a_agent.engine.journal import StepJournal, failure_reason
from a2a_agent.engine.model_turns import ModelTurns
from a2a_agent.engine.segments import enqueue_segment, running_segment, segment_of
from a2a_agent.harness.checks.decisions import DecisionSteps
from a2a_agent.harness.checks.facts import FactSteps
from a2a_agent.harness.checks.plan_harness import PlanHarness
from a2a_agent.harness.delegation.delegator import Delegator
from a2a_agent.harness.kernel.pauses import RUNNING_SEGMENT
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.model.model_work import ModelWork
from a2a_agent.observe import tracing
from a2a_agent.observe.logs import log_context
from a2a_agent.watched import crash_point
from persistence.records import TERMINAL_STATES

TRACES_KEPT = 4096
# The steps whose harness method reads its view (`StepContext.view`) before it writes or
# starts anything: the journal lets that read keep the step before it (journal.py). Checked
# by tests/test_journal.py; a step left out only costs a statement.
READS_ITS_VIEW_FIRST = frozenset(
    {"begin_attempt", "run_item", "verify_item", "call_model", "call_tool", "end_turn"}
)
log = logging.getLogger(__name__)
P = ParamSpec("P")


@DBOS.dbos_class()
class PlanRunner(ModelTurns, ItemWalk, DBOSConfiguredInstance):
    def __init__(
        self,
        harness: PlanHarness,
        work: ModelWork,
        decisions: DecisionSteps,
        facts: FactSteps,
        *,
        gate: StepGate,
        delegator: Delegator,
        journal: StepJournal,
    ) -> None:
        self.harness = harness
        self.work = work
        self.decisions = decisions
        self.facts = facts
        self.gate = gate
        self.delegator = delegator
        self.journal = journal
        self.step_slots = harness.ctx.config.step_slots  # shared with the harness's effects
        self.fault = harness.ctx.config.fault_file  # tests: a crash point's name (watched.py)
        self._traces: OrderedDict[str, str | None] = OrderedDict()
        super().__init__("plan-runner")

    async def _gated(
        self, task_id: str, step: Coroutine[Any, Any, StepResult], *, item_id: str | None = None
    ) -> JSON:
        """Run one harness step: counted by the gate (a shutdown waits for it), its logs and
        its span (in the task's trace) saying which task, item and step it is."""
        # The harness learns which segment runs the step from the workflow id, so a step of
        # a segment that paused, re-run after a crash, leaves the answer to the next segment.
        token = RUNNING_SEGMENT.set(segment_of(DBOS.workflow_id))
        name = str(getattr(step, "__name__", "step"))  # the harness method's name
        attributes = {"a2a.task_id": task_id, "a2a.step": name}
        if item_id is not None:
            attributes["a2a.item_id"] = item_id
        try:
            with (
                log_context(task_id, name, item_id),
                tracing.step_span(f"a2a.{name}", await self._trace_of(task_id), attributes) as span,
            ):
                async with self.gate.step(), self.step_slots.hold():
                    result = (await step).as_json()
                if self.fault is not None:  # tests only
                    crash_point(self.fault, f"inside-{name}")
                tracing.outcome(span, result)
                outcome = result.get("outcome")
                log.log(
                    logging.DEBUG if outcome in ("ok", "done") else logging.INFO,
                    "step %s: %s",
                    name,
                    outcome,
                )
                return result
        finally:
            # A step refused before it began (a shutdown, a cancel while the trace was read)
            # is a coroutine never awaited: closed here, so it is not left to the collector.
            step.close()
            RUNNING_SEGMENT.reset(token)

    async def _trace_of(self, task_id: str) -> str | None:
        """The task's trace context (kept with the task; it never changes), read once."""
        if task_id not in self._traces:
            self._traces[task_id] = await self.harness.ctx.runs.trace_context(task_id)
            while len(self._traces) > TRACES_KEPT:
                self._traces.popitem(last=False)
        return self._traces[task_id]

    # ---- steps: plans and commands ----------------------------------------------------------

    @DBOS.step(**OUTAGE_RETRY)
    async def snapshot(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.snapshot(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def begin_task(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.begin_task(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def begin_attempt(
        self, task_id: str, item_id: str, attempt: int, precheck_skipped: bool = False
    ) -> JSON:
        begun = self.harness.begin_attempt(
            task_id, item_id, attempt, precheck_skipped=precheck_skipped
        )
        return await self._gated(task_id, begun, item_id=item_id)

    # Preemptible: a cancel interrupts the running command instead of waiting for it; the
    # interrupted step's output is not recorded, so a resume re-runs it under the same key.
    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def run_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.harness.run_item(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def precheck_item(self, task_id: str, item_id: str) -> JSON:
        return await self._gated(
            task_id, self.harness.prechecks.precheck_item(task_id, item_id), item_id=item_id
        )

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def precheck_task(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.acceptance.precheck_task(task_id))

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def accept_task(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.acceptance.accept_task(task_id))

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def reverify(self, task_id: str, round_id: str) -> JSON:
        return await self._gated(task_id, self.harness.reverification.reverify(task_id, round_id))

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.harness.verify_item(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def publish(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.publisher.publish(task_id))

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def delegate_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.delegator.work_item(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(**OUTAGE_RETRY)
    async def settle_delegations(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.delegator.settle(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def finish(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.finish(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def fail(self, task_id: str, reason: str) -> JSON:
        return await self._gated(task_id, self.harness.fail(task_id, reason))

    @DBOS.step(**OUTAGE_RETRY)
    async def close(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.harness.close(task_id))

    # ---- steps: pauses ------------------------------------------------------------------

    @DBOS.step(**OUTAGE_RETRY)
    async def apply_decision(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.decisions.apply_decision(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def ask_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.decisions.ask_item(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def establish_facts(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.facts.establish(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(**OUTAGE_RETRY)
    async def review_plan(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.decisions.review_plan(task_id))

    # ---- steps: the model ---------------------------------------------------------------

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def call_model(self, task_id: str, call: JSON) -> JSON:
        return await self._gated(task_id, self.work.call_model(task_id, call))

    @DBOS.step(**OUTAGE_RETRY)
    async def planning_request(self, task_id: str) -> JSON:
        return await self._gated(task_id, self.work.planning_request(task_id))

    @DBOS.step(**OUTAGE_RETRY)
    async def accept_plan(self, task_id: str, attempt: int, plan: Any) -> JSON:
        return await self._gated(task_id, self.work.accept_plan(task_id, attempt, plan))

    @DBOS.step(**OUTAGE_RETRY)
    async def item_request(self, task_id: str, item_id: str, attempt: int) -> JSON:
        return await self._gated(
            task_id, self.work.item_request(task_id, item_id, attempt), item_id=item_id
        )

    @DBOS.step(preemptible=True, **OUTAGE_RETRY)
    async def call_tool(
        self, task_id: str, item_id: str, attempt: int, use: JSON, tool_use: JSON
    ) -> JSON:
        """`use`: turn, n (this tool use), uses (how many the answer holds) and notes_seq
        (the last of the caller's notes the model has read)."""
        return await self._gated(
            task_id,
            self.work.call_tool(
                task_id,
                item_id,
                attempt,
                tool_use,
                turn=use["turn"],
                n=use["n"],
                uses=use["uses"],
                notes_seq=int(use.get("notes_seq", 0)),
            ),
        )

    @DBOS.step(**OUTAGE_RETRY)
    async def end_turn(self, task_id: str, item_id: str, attempt: int, note: str) -> JSON:
        return await self._gated(
            task_id, self.work.end_turn(task_id, item_id, attempt, note), item_id=item_id
        )

    # ---- the workflow -------------------------------------------------------------------

    async def _call(
        self, step: Callable[P, Awaitable[JSON]], *args: P.args, **kwargs: P.kwargs
    ) -> JSON:
        """Run one step: through the journal in a run that keeps its steps there (the step's
        own coroutine, without DBOS's wrapper), else as the DBOS step it is."""
        if not self.journal.active():
            return await step(*args, **kwargs)
        body = inspect.unwrap(step)  # the method as written, under DBOS's decorator

        def attempt() -> Awaitable[JSON]:
            return body(self, *args, **kwargs)  # type: ignore[no-any-return]

        return await self.journal.step(step.__name__, attempt)

    async def _step(
        self, step: Callable[P, Awaitable[JSON]], *args: P.args, **kwargs: P.kwargs
    ) -> StepResult:
        """The funnel: every step's result passes here, and the outcomes that end or restart
        work are turned into control flow in this one place. Runs a step asks to start (a
        child run it made, a parent a child's end woke) are enqueued here, from the workflow,
        so a replay starts them once."""
        result = StepResult.from_json(await self._call(step, *args, **kwargs))
        starts = result.payload.get("start") or []
        # Tests only: die right after a step, its result waiting for its keep (the next
        # step's view read or a statement of its own: journal.py), so the step runs again
        # and must find its own records (`after-<step>`); or after one that asks runs to
        # start and before they are enqueued (`before-start`). `inside-<step>` (`_gated`)
        # dies after the step's own work, before the journal has its result.
        if self.fault is not None:
            crash_point(self.fault, "before-start" if starts else f"after-{step.__name__}")
        for task_id, segment in starts:
            await enqueue_segment(self.run_task, task_id, segment)
        if result.outcome == "stopped":
            raise RunStopped
        if result.outcome == "paused":
            raise RunPaused
        if result.outcome == "restart":
            raise ItemRestart(result.attempt)
        return result

    @DBOS.workflow()
    async def run_task(self, task_id: str, segment: int = 0) -> str:
        """One segment of a task's run: from its start, or from a reply, to its end or the
        next pause (workflow id: the task id, then `<task id>:s<segment>`). A run begun
        since the journal keeps its steps there; one begun before replays DBOS's records."""
        if await DBOS.patch_async("own-steps"):
            async with self.journal.segment(running_segment(task_id, segment)):
                return await self._segment(task_id, segment, journaled=True)
        return await self._segment(task_id, segment, journaled=False)

    async def _segment(self, task_id: str, segment: int, *, journaled: bool) -> str:
        try:
            ended = await self._run(task_id, segment, journaled=journaled)
        except RunPaused:
            return "paused"  # the wait is a row; nothing of this run stays in the process
        except RunStopped:
            # Ended by a step (a budget stop: closed already) or by others (a cancel, the
            # watchdog): the closing writes the report and commits the files if none did.
            await self._call(self.close, task_id)
            ended = "stopped"
        except Exception as exc:  # noqa: BLE001  (recorded on the task, not swallowed)
            # The run cannot go on; say so on the task instead of leaving it working forever.
            # Cancellation is a BaseException (DBOS's and asyncio's) and passes through.
            await self._call(self.fail, task_id, failure_reason(exc))
            ended = "failed"
        # A child run's end moves its parent on (its delegation ended in the same record); a
        # run's end cancels the delegates still working for it.
        await self._step(self.settle_delegations, task_id)
        return ended

    async def _run(self, task_id: str, segment: int, *, journaled: bool) -> str:
        # Runs started before pre-checks and acceptance checks existed replay without them,
        # those started before re-verification without it, and so on (DBOS patching). A run
        # started since "all-five" records one marker for the five (each costs the workflow
        # two database round trips); one started before it replays its own markers. A run
        # whose steps the journal keeps began after all five.
        if journaled or await DBOS.patch_async("all-five"):
            prechecks = regressions = publishing = plan_prechecks = lean = True
        else:
            prechecks = await DBOS.patch_async("checks-that-fail")
            regressions = await DBOS.patch_async("regressions") if prechecks else False
            publishing = await DBOS.patch_async("publish") if regressions else False
            plan_prechecks = await DBOS.patch_async("plan-precheck") if publishing else False
            # No step for what does nothing: a pre-check an item opted out of is noted by its
            # first begin_attempt, and a plan without its own check skips both plan checks.
            lean = await DBOS.patch_async("lean-steps") if plan_prechecks else False
        snap = (await self._step(self.snapshot, task_id)).payload
        if snap["state"] in TERMINAL_STATES:
            raise RunStopped  # ended before this run began (canceled while queued)
        if segment > 0:
            await self._step(self.apply_decision, task_id)
            snap = (await self._step(self.snapshot, task_id)).payload
        if snap["state"] == "submitted":
            await self._step(self.begin_task, task_id)
        if not snap["items"]:
            await self._plan(task_id)
            await self._step(self.review_plan, task_id)
            snap = (await self._step(self.snapshot, task_id)).payload
        if plan_prechecks and plan_check(snap, lean):
            checked = await self._step(self.precheck_task, task_id)
            if checked.outcome == "failed":
                return "failed"  # the plan's own check already passed before any work: refused
        rounds = Rounds(segment)
        while True:
            walked = await self._walk(
                task_id, snap, rounds if regressions else None, prechecks, lean=lean
            )
            if walked == "walked" and regressions:
                # Every item has an outcome: every done item's check must still pass.
                walked = await self._reverified(task_id, rounds)
            if walked == "reopened":
                snap = (await self._step(self.snapshot, task_id)).payload
                continue
            if walked != "walked":
                return walked
            break
        if prechecks and plan_check(snap, lean):
            accepted = await self._step(self.accept_task, task_id)
            if accepted.outcome == "failed":
                return "failed"  # the plan's own check did not pass: the run ended there
        wanted = publishing and snap.get("publish")
        published = await self._step(self.publish, task_id) if wanted else None
        if published is not None and published.outcome == "failed":
            return "failed"  # not published (refused, or the branch moved on): recorded
        return str((await self._step(self.finish, task_id)).payload["state"])
