"""How a run ends, all in one place: finished, failed, stopped by its budget, or closed after
others ended it (a cancel, the watchdog).

Each ending writes the final state (a closing keeps the one others wrote), its reason as the
last progress entry and the final report, and commits plan.json and progress.md as they then
are, so the workspace is clean; one recorded step keyed by the ending, so an ending re-run
after a crash is recorded once.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from a2a_agent.budget import Exhausted
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.outputs import (
    OutputConfig,
    outputs_of,
    outputs_read,
    packs_here,
    results,
    run_pack,
)
from a2a_agent.harness.kernel.report import build_report, stopped_at
from a2a_agent.harness.kernel.results import JSON, StepResult
from persistence.records import (
    Decision,
    ItemChange,
    ItemRow,
    StepRecord,
    StepView,
    Transition,
)

UNDER_WAY = ("in_progress", "verifying")


def interrupted(
    view: StepView, reason: str
) -> tuple[list[tuple[ItemChange, Transition]], StepView]:
    """The items whose attempt was under way when the run ended, as `interrupted` (that
    attempt's entry in their history says why), and the view with them so: a run that is
    over leaves no item `in_progress`."""
    changes: list[tuple[ItemChange, Transition]] = []
    items: list[ItemRow] = []
    for item in view.items:
        if item.status not in UNDER_WAY:
            items.append(item)
            continue
        attempt = max(item.attempts, 1)
        history = with_attempt(item, attempt, outcome=f"interrupted: {reason}")
        change = ItemChange(
            item_id=item.item_id, status="interrupted", attempts=item.attempts, history=history
        )
        transition = Transition(
            item_id=item.item_id,
            attempt=attempt,
            from_state=item.status,
            to_state="interrupted",
            reason=f"attempt {attempt} was under way when the run ended: {reason}",
        )
        changes.append((change, transition))
        items.append(dataclasses.replace(item, status="interrupted", history=history))
    return changes, dataclasses.replace(view, items=items)


class RunEndings:
    def __init__(self, ctx: StepContext) -> None:
        self.ctx = ctx

    async def report(
        self, view: StepView, items: list[ItemRow] | None = None, stopped: JSON | None = None
    ) -> JSON:
        """The final report from the stored items, the budget ledger, what crashes cost the
        run (steps re-run, workspaces restored), whatever the ending, what the plan's own
        check found before the work and after it, and the person's decision that ended the
        run if one did (`stopped`). The files it changed are the outputs' (`closing_record`,
        read once with them)."""
        report = build_report(
            items if items is not None else view.items,
            (),
            await self.ctx.guard.budgets.budget_status(view.task_id),
            await self.ctx.runs.run_counts(view.task_id),
            view.policy.get("acceptance"),
            stopped=stopped,
        )
        published = view.policy.get("published")
        return {**report, "publish": published} if published else report

    async def failing_item(
        self, view: StepView, item: ItemRow, record: StepRecord, *, history: list[JSON]
    ) -> StepRecord:
        """`record`, the step that fails `item` and with it the run, completed with the
        report and the closing entry of a run that ends there (its evidence as recorded)."""
        failed = dataclasses.replace(
            item, status="failed", evidence=record.item.evidence if record.item else None,
            history=history,
        )  # fmt: skip
        after = dataclasses.replace(
            view, items=[failed if i.item_id == item.item_id else i for i in view.items]
        )
        record = dataclasses.replace(record, report=await self.report(after))
        record = await self.closing_record(view, record, after.items)
        self.ctx.forget(view.task_id)
        return record

    async def closing_record(
        self, view: StepView, record: StepRecord, items: list[ItemRow] | None = None
    ) -> StepRecord:
        """`record` (an end of the run) with the files it leaves committed: its transitions
        timed now and starting where the task is, its checkpoint the commit."""
        now = datetime.now(UTC)
        transitions = [
            Transition(
                to_state=t.to_state,
                reason=t.reason,
                item_id=t.item_id,
                attempt=t.attempt,
                from_state=t.from_state if t.from_state or t.item_id else view.state,
                at=now,
            )
            for t in record.transitions
        ]
        record = dataclasses.replace(record, transitions=transitions)
        ws = self.ctx.workspace(view.task_id)
        before = ws.head()
        # What the run hands back (its diff, its commits as a bundle, the files it changed)
        # is read in the closing commit's box, after it; the bundle's pack written here where
        # it can be (`packs.py`).
        pack_here = record.report is not None and packs_here(ws, view, before)
        read = outputs_read(view, before, pack_here=pack_here) if record.report is not None else ()
        checkpoint, printed = await self.ctx.commit(
            view,
            items if items is not None else view.items,
            transitions,
            key=record.effect_key,
            message=f"Run ended: {transitions[-1].reason}"[:200] if transitions else "Run ended",
            read=read,
        )
        record = dataclasses.replace(record, checkpoint=checkpoint)
        if record.report is None:
            return record
        config = OutputConfig(self.ctx.config.public_url, self.ctx.config.inline_output_bytes)
        head = ws.head()
        if printed is not None and head is not None and view.base_sha is not None:
            pack = await run_pack(ws, view, head) if pack_here else None
            made = outputs_of(
                printed, view, config, base=view.base_sha, head=head, before=before, pack=pack
            )
        else:  # no read came with the commit (made before this run of the step, say)
            made = await results(ws, view, config, before=before)
        # The files the work changed: its commits' before this closing one (none if it had
        # none), read with the outputs; the diff and the files output also hold what this
        # commit took of an attempt cut short.
        report = {**record.report, "outputs": made.shown, "files_changed": made.committed}
        return dataclasses.replace(record, report=report, outputs=made.files)

    async def _end(
        self,
        view: StepView,
        *,
        step: str,
        state: str | None,
        text: str | None,
        reason: str,
        metadata_patch: JSON | None = None,
        stopped: JSON | None = None,
    ) -> str:
        closing = state is None
        changes, after = interrupted(view, reason)
        record = await self.closing_record(
            view,
            StepRecord(
                effect_key=effect_key(view.task_id, step),
                step=step,
                result={},
                item=changes[0][0] if changes else None,
                more_items=[change for change, _ in changes[1:]],
                task_state=state,
                status_text=text,
                transitions=[
                    *(transition for _, transition in changes),
                    Transition(to_state=state or view.state, reason=reason),
                ],
                report=await self.report(after, stopped=stopped),
                metadata_patch=metadata_patch,
                closing=closing,
            ),
            after.items,
        )
        outcome = await self.ctx.record(view, record)
        self.ctx.forget(view.task_id)
        return outcome.task_state

    async def finish(self, view: StepView) -> StepResult:
        summary = build_report(view.items, acceptance=view.policy.get("acceptance"))["summary"]
        state = await self._end(
            view, step="finish", state="completed", text=f"Completed: {summary}", reason=summary
        )
        return StepResult.ok({"state": state})

    async def fail(
        self, view: StepView, reason: str, *, decided: Decision | None = None
    ) -> StepResult:
        """End the run as failed when it cannot go on (its reason goes to the caller); when
        a person's decision ended it (`decided`), the report names the decision and says
        its item was refused, not that it was under way when the run ended."""
        state = await self._end(
            view,
            step="fail",
            state="failed",
            text=f"Failed: {reason}",
            reason=reason,
            stopped=stopped_at(decided) if decided is not None else None,
        )
        return StepResult.ok({"state": state})

    async def close(self, view: StepView) -> StepResult:
        """Others ended the run (a cancel, the watchdog): write its report and final entry and
        commit its files; the state stays as they set it. Nothing if it is closed already."""
        if not view.is_terminal or view.closed:
            return StepResult.ok({"state": view.state})
        summary = build_report(view.items)["summary"]
        await self._end(
            view,
            step="close",
            state=None,
            text=None,
            reason=f"the run stopped here ({view.state}): {summary}",
        )
        return StepResult.ok({"state": view.state})

    async def out_of_time(self, view: StepView, item: ItemRow, attempt: int) -> StepResult:
        """The item's own time limit passed: it fails (no attempt is left to it), and so does
        the run, as when its attempts run out."""
        reason = f"item {item.item_id} used up its time limit of {item.timeout_s} s"
        history = with_attempt(item, attempt, outcome="out of time")
        failed = dataclasses.replace(item, status="failed", history=history)
        after = dataclasses.replace(
            view, items=[failed if i.item_id == item.item_id else i for i in view.items]
        )
        record = await self.closing_record(
            view,
            StepRecord(
                effect_key=effect_key(
                    view.task_id, "out_of_time", scope=item.item_id, attempt=attempt
                ),
                step="out_of_time",
                result={},
                item=ItemChange(
                    item_id=item.item_id, status="failed", attempts=attempt, history=history
                ),
                task_state="failed",
                status_text=f"Failed: {reason}.",
                transitions=[
                    Transition(
                        item_id=item.item_id,
                        attempt=attempt,
                        from_state=item.status,
                        to_state="failed",
                        reason=f"{reason}; no attempts left",
                    ),
                    Transition(from_state="working", to_state="failed", reason=reason),
                ],
                report=await self.report(after),
            ),
            after.items,
        )
        await self.ctx.record(view, record)
        self.ctx.forget(view.task_id)
        return StepResult("stopped", attempt)

    async def budget_stop(self, view: StepView, spent: Exhausted) -> StepResult:
        """A clean stop: the plan stays as it is, a final entry says where and why."""
        await self._end(
            view,
            step="budget_stop",
            state="failed",
            text=f"Stopped: {spent.reason}",
            reason=f"stopped: {spent.reason}",
            metadata_patch={
                "failure": {
                    "reason": "budget_exhausted",
                    "dimension": spent.dimension,
                    "used": spent.used,
                    "reserved": spent.reserved,
                    "limit": spent.limit,
                }
            },
        )
        return StepResult("stopped")
