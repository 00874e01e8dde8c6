"""The work of one plan, as steps: each step reads once, does one effect, records once.

Nothing here knows about DBOS. The engine wraps each public coroutine as a checkpointed step
and decides only from the `StepResult` it returns; every step is safe to run again after a
crash, because effects are keyed (`effects.py`) and records are idempotent by that key.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from a2a_agent.budget import Spend
from a2a_agent.harness.checks.acceptance import AcceptanceCheck
from a2a_agent.harness.checks.out_of_attempts import failed_check, out_of_attempts
from a2a_agent.harness.checks.prechecks import PreChecks, skipped_because
from a2a_agent.harness.checks.publish import Publisher
from a2a_agent.harness.checks.reverify import Reverification
from a2a_agent.harness.checks.seeding import Seeder
from a2a_agent.harness.kernel.attempts import to_verification, within_item
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects, recorded
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.evidence import (
    STATUS_OUTPUT_CHARS,
    evidence,
    output_in_words,
    with_attempt,
)
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.errors import NotFound
from persistence.records import (
    Charge,
    Checkpoint,
    ItemChange,
    ItemRow,
    StepRecord,
    StepView,
    Transition,
)

# What a recorded verification said, as the step result the body goes on from.
VERIFIED = {
    "done": "done",
    "retry": "retry",
    "failed": "failed",
    "paused": "paused",
    "skipped": "ok",
}


class PlanHarness:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings
        self.prechecks = PreChecks(ctx, effects, endings)
        self.acceptance = AcceptanceCheck(ctx, effects, endings)
        self.reverification = Reverification(ctx, effects, endings)
        self.seeder = Seeder(ctx, effects, endings)
        self.publisher = Publisher(ctx, effects, endings)

    async def snapshot(self, task_id: str) -> StepResult:
        view = await self.ctx.view(task_id)
        items = [
            {
                "id": i.item_id,
                "status": i.status,
                "attempts": i.attempts,
                "run": i.run is not None,
                "ask": i.ask is not None,
                "facts": bool(i.facts),
                "delegate": i.delegate_to is not None,
                # Whether a pre-check command runs (an opted-out or asking item has none).
                "precheck": i.precheck and i.ask is None,
            }
            for i in view.items
        ]
        every = view.policy.get("reverify_every")
        publish = bool(view.policy.get("publish"))
        acceptance = isinstance(view.policy.get("acceptance"), dict)
        return StepResult.ok(
            {
                "state": view.state,
                "items": items,
                "reverify_every": every,
                "publish": publish,
                "acceptance": acceptance,
            }
        )

    async def begin_task(self, task_id: str) -> StepResult:
        view = await self.ctx.view(task_id)
        if self.seeder.needs_seed(view):
            # The caller's repository or files, made into the workspace once.
            seeded = await self.seeder.seed(task_id)
            if seeded.outcome != "ok":
                return StepResult("stopped")  # it failed (recorded) or the task ended
            view = await self.ctx.view(task_id)
        ws = self.ctx.workspace(task_id)
        key = effect_key(task_id, "begin")
        ws.clear_stale_locks()
        message = "Start task: plan.json and progress.md"
        if view.checkpoint_sha is not None:
            # A seeded workspace, or one that continues an earlier task: it starts as that
            # checkpoint (a continuation's bundles were copied when it was submitted).
            await self.ctx.check_workspace(view)
            message = f"Start from checkpoint {view.checkpoint_sha[:12]}: plan.json and progress.md"
        await ws.ensure()
        ws.ignore_build_junk(local=view.seed is not None)
        await self.ctx.render(view, view.items)
        sha, bundle = await ws.commit(message, key, view.checkpoint_sha)
        executor = self.ctx.config.executor_id
        record = StepRecord(
            effect_key=key,
            step="begin_task",
            result={},
            task_state="working",
            status_text=f"Working; picked up by worker {executor}.",
            transitions=[
                Transition(
                    from_state="submitted",
                    to_state="working",
                    reason=f"picked up by worker {executor}",
                )
            ],
            checkpoint=Checkpoint(sha=sha, bundle=bundle) if bundle is not None else None,
            # Results are measured from here, unless the workspace started from the caller's.
            base_sha=sha if view.base_sha is None else None,
        )
        return await self.ctx.advance(view, record)

    async def begin_attempt(
        self, task_id: str, item_id: str, attempt: int, *, precheck_skipped: bool = False
    ) -> StepResult:
        """An attempt begins; `precheck_skipped`: the item has no pre-check to run (it opted
        out, or a person's answer is its work), which this first record says."""
        view = await self.ctx.view(task_id)
        item = view.item(item_id)
        restored = await self.ctx.check_workspace(view)
        history = None
        if precheck_skipped and not any(h.get("attempt") == 0 for h in item.history or []):
            shown = {"result": "skipped", "why": skipped_because(item)}
            history = with_attempt(item, 0, precheck=shown)
        record = StepRecord(
            effect_key=effect_key(task_id, "begin", scope=item_id, attempt=attempt),
            step="begin_item",
            result={},
            item=ItemChange(
                item_id=item_id, status="in_progress", attempts=attempt, history=history
            ),
            task_state="working",
            status_text=f"Working on item {item_id}: {item.title}",
            transitions=[
                Transition(
                    item_id=item_id,
                    attempt=attempt,
                    from_state=item.status,
                    to_state="in_progress",
                    reason=f"started: {item.title}" + (f" ({restored})" if restored else ""),
                )
            ],
            then=self.ctx.first_effect(task_id, item, attempt),
        )
        return await self.ctx.advance(view, record, attempt)

    # ---- commands -------------------------------------------------------------------------

    def _command_effect(
        self, task_id: str, item: ItemRow, attempt: int, step: str, command: str
    ) -> Effect:
        return Effect(
            key=effect_key(task_id, step, scope=item.item_id, attempt=attempt),
            step=step,
            item_id=item.item_id,
            attempt=attempt,
            spend=Spend(),
            integrity="tree",
            action=command,
        )

    async def _run(self, task_id: str, effect: Effect, command: str, timeout_s: int) -> JSON:
        assert effect.item_id is not None and effect.attempt is not None
        result = await self.ctx.run_in_workspace(
            task_id,
            command,
            item_id=effect.item_id,
            attempt=effect.attempt,
            key=effect.key,
            timeout_s=timeout_s,
        )
        return {"command": result.as_json()}

    async def run_item(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        key = effect_key(task_id, "run", scope=item_id, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        item = view.item(item_id)
        if item.run is None:
            raise NotFound(f"item {item_id} has no run command")
        command = item.run
        effect = self._command_effect(task_id, item, attempt, "run", command)
        timeout = within_item(item, item.run_timeout_s or self.ctx.config.command_timeout_s)
        if timeout is None and not recorded(view):
            return await self.endings.out_of_time(view, item, attempt)

        async def conclude(value: JSON, runs: int) -> Concluded:
            result = CommandResult.from_json(value["command"])
            done = f"ran `{command}` (exit {result.exit_code})"
            record = to_verification(
                task_id,
                item,
                attempt,
                step="run",
                done=done,
                result=value,
                charge=Charge(kind="command"),
                runs=runs,
                history=with_attempt(item, attempt, run=evidence(result, runs)),
            )
            return Concluded(record, StepResult.ok(attempt=attempt))

        return await self.effects.run(
            view, effect, lambda: self._run(task_id, effect, command, timeout or 1), conclude
        )

    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        key = effect_key(task_id, "verify", scope=item_id, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        item = view.item(item_id)
        effect = self._command_effect(task_id, item, attempt, "verify", item.verify_command)
        verify_timeout = within_item(item, item.verify_timeout_s)
        if verify_timeout is None and not recorded(view):
            return await self.endings.out_of_time(view, item, attempt)

        async def conclude(value: JSON, runs: int) -> Concluded:
            if value.get("outcome") in VERIFIED:
                # Recorded before a crash: the outcome stands as it was recorded.
                outcome = VERIFIED[value["outcome"]]
                then = attempt + 1 if outcome == "retry" else attempt
                replay = StepRecord(effect_key=key, step="verify", result=value, runs=runs)
                return Concluded(replay, StepResult(outcome, then))  # type: ignore[arg-type]
            result = CommandResult.from_json(value["command"])
            if result.passed:
                return await self._verified(view, item, attempt, value, runs)
            return await self._not_verified(view, item, attempt, value, runs)

        return await self.effects.run(
            view,
            effect,
            lambda: self._run(task_id, effect, item.verify_command, verify_timeout or 1),
            conclude,
        )

    async def _not_verified(
        self, view: StepView, item: ItemRow, attempt: int, value: JSON, runs: int
    ) -> Concluded:
        result = CommandResult.from_json(value["command"])
        shown = evidence(result, runs)
        failures = item.failures + 1
        item_id, verify = item.item_id, item.verify_command
        if failures < item.max_attempts:
            retry = failed_check(
                view, item, attempt, value, shown, runs=runs, outcome="retry",
                status="in_progress", next_attempt=True,
                reason=f"verification `{verify}` exited {result.exit_code}; "
                f"retrying ({failures} of {item.max_attempts} attempts used)",
                task_state="working",
                status_text=f"Item {item_id} failed verification; retrying "
                f"({failures} of {item.max_attempts} attempts used)",
                then=self.ctx.first_effect(view.task_id, item, attempt + 1),
            )  # fmt: skip
            return Concluded(retry, StepResult("retry", attempt + 1))
        on_failure = view.policy.get("on_item_failure", "stop")
        if on_failure in ("ask", "skip"):
            return out_of_attempts(
                self.effects.pauses, view, item, attempt, value, runs=runs, ask=on_failure == "ask"
            )
        failed = failed_check(
            view, item, attempt, value, shown, runs=runs, outcome="failed", status="failed",
            reason=f"verification `{verify}` exited {result.exit_code}; no attempts left",
            more_transitions=[
                Transition(from_state="working", to_state="failed", reason=f"item {item_id} failed")
            ],
            task_state="failed",
            status_text=f"Item {item_id} failed verification after {failures} attempt(s): "
            f"`{verify}` exited {result.exit_code}. "
            f"{output_in_words(result.output_tail, chars=STATUS_OUTPUT_CHARS)}",
        )  # fmt: skip
        history = (failed.item.history if failed.item is not None else None) or []
        failed = await self.endings.failing_item(view, item, failed, history=history)
        return Concluded(failed, StepResult("failed", attempt))

    async def _verified(
        self, view: StepView, item: ItemRow, attempt: int, value: JSON, runs: int
    ) -> Concluded:
        """Commit the workspace, plan.json/progress.md already showing the item done."""
        result = CommandResult.from_json(value["command"])
        shown = evidence(result, runs)
        history = with_attempt(item, attempt, verify=shown, outcome="done")
        key = effect_key(view.task_id, "verify", scope=item.item_id, attempt=attempt)
        done = Transition(
            item_id=item.item_id,
            attempt=attempt,
            from_state="verifying",
            to_state="done",
            reason=f"verified: `{item.verify_command}` exited 0",
            at=datetime.now(UTC),
        )
        items = [
            dataclasses.replace(i, status="done", attempts=attempt, evidence=shown, history=history)
            if i.item_id == item.item_id
            else i
            for i in view.items
        ]
        checkpoint, _ = await self.ctx.commit(
            view,
            items,
            [done],
            key=key,
            message=f"Item {item.item_id}: {item.title}\n\n"
            f"Verified by `{item.verify_command}` (exit 0).",
        )
        sha = checkpoint.sha if checkpoint else self.ctx.workspace(view.task_id).head()
        record = StepRecord(
            effect_key=key,
            step="verify",
            result={**value, "outcome": "done", "commit": sha},
            item=ItemChange(
                item_id=item.item_id,
                status="done",
                attempts=attempt,
                evidence=shown,
                commit_sha=sha,
                history=history,
            ),
            transitions=[done],
            # None when this step already recorded its checkpoint before a crash.
            checkpoint=checkpoint,
            charge=Charge(kind="command"),
            runs=runs,
        )
        return Concluded(record, StepResult("done", attempt))

    # ---- the end ------------------------------------------------------------------------

    async def finish(self, task_id: str) -> StepResult:
        return await self.endings.finish(await self.ctx.view(task_id))

    async def fail(self, task_id: str, reason: str) -> StepResult:
        return await self.endings.fail(await self.ctx.view(task_id), reason)

    async def close(self, task_id: str) -> StepResult:
        return await self.endings.close(await self.ctx.view(task_id))
