"""The work of one plan, as steps: each step does one effect and records it in one transaction.

Nothing here knows about DBOS. The engine wraps each public coroutine as a checkpointed step;
every method is safe to run again after a crash, because effects are keyed and records are
idempotent by that key. Each step first checks that the workspace is as the last step left it;
if not (a lost disk, another machine, a half-run command), it restores the last checkpoint and
restarts the item as a new attempt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from a2a_agent.budget import BudgetGuard, BudgetStop, Exhausted
from a2a_agent.harness.commands import CommandResult, run_command
from a2a_agent.harness.integrity import check_workspace
from a2a_agent.harness.render import plan_document, progress_document
from a2a_agent.harness.report import build_report
from a2a_agent.harness.workspace import Workspace
from persistence.errors import NotFound
from persistence.ledger import Ledger
from persistence.records import (
    JSON,
    TERMINAL_STATES,
    Charge,
    Checkpoint,
    ItemChange,
    ItemRow,
    StepRecord,
    Transition,
    TransitionRow,
)
from persistence.store import TaskStore

COMMAND_STEPS = frozenset({"run", "verify"})


def idempotency_key(task_id: str, item_id: str, attempt: int, step: str) -> str:
    """Same inputs, same key: a step re-run after a crash presents the key it had before."""
    return f"{task_id}:{item_id}:{attempt}:{step}"


def _evidence(result: CommandResult) -> JSON:
    return {
        "command": result.command,
        "exit_code": result.exit_code,
        "output_tail": result.output_tail,
    }


@dataclass(frozen=True)
class HarnessConfig:
    workspaces: Path
    command_env: Mapping[str, str]
    command_timeout_s: int
    output_tail_bytes: int
    executor_id: str


class PlanHarness:
    def __init__(
        self, store: TaskStore, ledger: Ledger, guard: BudgetGuard, config: HarnessConfig
    ) -> None:
        self.store = store
        self.ledger = ledger
        self.guard = guard
        self.config = config

    def workspace(self, task_id: str) -> Workspace:
        return Workspace(self.config.workspaces / task_id)

    async def _render(
        self,
        task_id: str,
        items: list[ItemRow] | None = None,
        transitions: list[TransitionRow] | None = None,
    ) -> None:
        row = await self.store.get_task(task_id, None)
        if row is None:
            raise NotFound(task_id)
        goal = row.plan["goal"] if row.plan else await self.store.task_goal(task_id) or ""
        items = items if items is not None else await self.store.get_items(task_id)
        if transitions is None:
            transitions = await self.store.get_transitions(task_id)
        self.workspace(task_id).write_files(
            plan_document(task_id, goal, items),
            progress_document(task_id, goal, items, transitions),
        )

    async def item(self, task_id: str, item_id: str) -> ItemRow:
        for item in await self.store.get_items(task_id):
            if item.item_id == item_id:
                return item
        raise NotFound(f"{task_id}/{item_id}")

    async def record(self, task_id: str, record: StepRecord) -> str:
        """Record a step with the workspace's fingerprint; re-render the files; new state."""
        fingerprint = await self.workspace(task_id).fingerprint()
        # A harness command is one step of the budget (it counts towards steps without progress).
        charge = Charge(kind="command") if record.step in COMMAND_STEPS else record.charge
        outcome = await self.store.record_step(
            task_id, dataclasses.replace(record, fingerprint=fingerprint, charge=charge)
        )
        await self._render(task_id)
        return outcome.task_state

    def command_env(
        self, task_id: str, item_id: str, attempt: int, key: str, root: Path
    ) -> dict[str, str]:
        """What every command sees: the settings' small environment and the step's key."""
        return {
            **self.config.command_env,
            "A2A_TASK_ID": task_id,
            "A2A_ITEM_ID": item_id,
            "A2A_ATTEMPT": str(attempt),
            "A2A_IDEMPOTENCY_KEY": key,
            "A2A_WORKSPACE": str(root),
        }

    async def check_checkpoint_present(self, task_id: str) -> str | None:
        """Between the model's tool calls: restore only a lost workspace (see integrity)."""
        return await check_workspace(
            self.store, self.ledger, self.workspace(task_id), task_id, compare_tree=False
        )

    async def _check_workspace(self, task_id: str, key: str | None = None) -> str | None:
        return await check_workspace(
            self.store, self.ledger, self.workspace(task_id), task_id, key=key
        )

    async def restart(self, task_id: str, item: ItemRow, attempt: int, why: str) -> JSON:
        state = await self.record(
            task_id,
            StepRecord(
                effect_key=idempotency_key(task_id, item.item_id, attempt, "restore"),
                step="restore",
                result={},
                item=ItemChange(item_id=item.item_id, status="in_progress", attempts=attempt + 1),
                transitions=[
                    Transition(
                        item_id=item.item_id,
                        attempt=attempt + 1,
                        from_state=item.status,
                        to_state="in_progress",
                        reason=f"{why}; restarting the item as attempt {attempt + 1}",
                    )
                ],
            ),
        )
        if state in TERMINAL_STATES:
            return {"outcome": "stopped", "attempt": attempt}
        return {"outcome": "restart", "attempt": attempt + 1}

    # ---- steps ------------------------------------------------------------------------

    async def snapshot(self, task_id: str) -> JSON:
        row = await self.store.get_task(task_id, None)
        if row is None:
            raise NotFound(task_id)
        items = await self.store.get_items(task_id)
        return {
            "state": row.state,
            "items": [
                {
                    "id": i.item_id,
                    "status": i.status,
                    "attempts": i.attempts,
                    "run": i.run is not None,
                }
                for i in items
            ],
        }

    async def begin_task(self, task_id: str) -> JSON:
        ws = self.workspace(task_id)
        key = f"{task_id}:task:begin"
        ws.clear_stale_locks()
        await ws.ensure()
        await self._render(task_id)
        sha = await ws.commit("Start task: plan.json and progress.md", key)
        state = await self.record(
            task_id,
            StepRecord(
                effect_key=key,
                step="begin_task",
                result={},
                task_state="working",
                status_text=f"Working; picked up by worker {self.config.executor_id}.",
                transitions=[
                    Transition(
                        from_state="submitted",
                        to_state="working",
                        reason=f"picked up by worker {self.config.executor_id}",
                    )
                ],
                checkpoint=Checkpoint(sha=sha, bundle=await ws.bundle_since(None)),
            ),
        )
        return {"stopped": state in TERMINAL_STATES}

    async def begin_attempt(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self.item(task_id, item_id)
        restored = await self._check_workspace(task_id)
        state = await self.record(
            task_id,
            StepRecord(
                effect_key=idempotency_key(task_id, item_id, attempt, "begin"),
                step="begin_item",
                result={},
                item=ItemChange(item_id=item_id, status="in_progress", attempts=attempt),
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
            ),
        )
        return {"stopped": state in TERMINAL_STATES}

    async def _command(
        self,
        task_id: str,
        item: ItemRow,
        attempt: int,
        *,
        step: str,
        command: str,
        timeout_s: int,
    ) -> CommandResult:
        key = idempotency_key(task_id, item.item_id, attempt, step)
        effect = await self.ledger.get_effect(key)
        if effect is None or effect.status != "completed":
            await self.guard.check(task_id, exclude_key=key)  # raises BudgetStop
            effect = await self.ledger.start_effect(key, task_id, item.item_id, attempt, step)
        if effect.status == "completed" and effect.result is not None:
            return CommandResult.from_json(effect.result["command"])
        ws = self.workspace(task_id)
        env = self.command_env(task_id, item.item_id, attempt, key, ws.root)
        return await run_command(
            command,
            cwd=ws.root,
            env=env,
            timeout_s=timeout_s,
            tail_bytes=self.config.output_tail_bytes,
            pid_file=ws.command_pid_file,
        )

    async def run_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self.item(task_id, item_id)
        if item.run is None:
            raise NotFound(f"item {item_id} has no run command")
        restored = await self._check_workspace(
            task_id, idempotency_key(task_id, item_id, attempt, "run")
        )
        if restored:
            return await self.restart(task_id, item, attempt, restored)
        try:
            result = await self._command(
                task_id,
                item,
                attempt,
                step="run",
                command=item.run,
                timeout_s=self.config.command_timeout_s,
            )
        except BudgetStop as stop:
            return await self.stop_for_budget(task_id, stop.spent)
        state = await self.record(
            task_id,
            StepRecord(
                effect_key=idempotency_key(task_id, item_id, attempt, "run"),
                step="run",
                result={"command": result.as_json()},
                item=ItemChange(item_id=item_id, status="verifying", attempts=attempt),
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=attempt,
                        from_state="in_progress",
                        to_state="verifying",
                        reason=f"ran `{item.run}` (exit {result.exit_code}); verifying with "
                        f"`{item.verify_command}`",
                    )
                ],
            ),
        )
        return {"outcome": "stopped" if state in TERMINAL_STATES else "verify", "attempt": attempt}

    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self.item(task_id, item_id)
        key = idempotency_key(task_id, item_id, attempt, "verify")
        restored = await self._check_workspace(task_id, key)
        if restored:
            return await self.restart(task_id, item, attempt, restored)
        try:
            result = await self._command(
                task_id,
                item,
                attempt,
                step="verify",
                command=item.verify_command,
                timeout_s=item.verify_timeout_s,
            )
        except BudgetStop as stop:
            return await self.stop_for_budget(task_id, stop.spent)
        evidence = _evidence(result)
        failures = item.failures + 1
        if result.passed:
            record = await self._verified(task_id, item, attempt, result, key)
        elif failures < item.max_attempts:
            record = StepRecord(
                effect_key=key,
                step="verify",
                result={"command": result.as_json(), "outcome": "retry"},
                item=ItemChange(
                    item_id=item_id,
                    status="in_progress",
                    attempts=attempt + 1,
                    evidence=evidence,
                    failures=failures,
                ),
                task_state="working",
                status_text=f"Item {item_id} failed verification; retrying "
                f"({failures} of {item.max_attempts} attempts used)",
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=attempt + 1,
                        from_state="verifying",
                        to_state="in_progress",
                        reason=f"verification `{item.verify_command}` exited {result.exit_code}; "
                        f"retrying ({failures} of {item.max_attempts} attempts used)",
                    )
                ],
            )
        else:
            failed = dataclasses.replace(item, status="failed", evidence=evidence)
            items = [
                failed if i.item_id == item_id else i for i in await self.store.get_items(task_id)
            ]
            record = StepRecord(
                effect_key=key,
                step="verify",
                result={"command": result.as_json(), "outcome": "failed"},
                item=ItemChange(
                    item_id=item_id,
                    status="failed",
                    attempts=attempt,
                    evidence=evidence,
                    failures=failures,
                ),
                task_state="failed",
                status_text=f"Item {item_id} failed verification after {failures} attempt(s): "
                f"`{item.verify_command}` exited {result.exit_code}. Output tail:\n"
                f"{result.output_tail[-1500:]}",
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=attempt,
                        from_state="verifying",
                        to_state="failed",
                        reason=f"verification `{item.verify_command}` exited "
                        f"{result.exit_code}; no attempts left",
                    ),
                    Transition(
                        from_state="working", to_state="failed", reason=f"item {item_id} failed"
                    ),
                ],
                report=await self._report(task_id, items),
            )
        state = await self.record(task_id, record)
        if state in TERMINAL_STATES and state != "failed":
            return {"outcome": "stopped", "attempt": attempt}
        outcome = "retry" if record.result["outcome"] == "retry" else record.result["outcome"]
        return {"outcome": outcome, "attempt": attempt + 1 if outcome == "retry" else attempt}

    async def _verified(
        self, task_id: str, item: ItemRow, attempt: int, result: CommandResult, key: str
    ) -> StepRecord:
        """Commit the workspace, plan.json/progress.md already showing the item done."""
        evidence = _evidence(result)
        done = ItemChange(item_id=item.item_id, status="done", attempts=attempt, evidence=evidence)
        transition = Transition(
            item_id=item.item_id,
            attempt=attempt,
            from_state="verifying",
            to_state="done",
            reason=f"verified: `{item.verify_command}` exited 0",
        )
        items = [
            dataclasses.replace(i, status="done", attempts=attempt, evidence=evidence)
            if i.item_id == item.item_id
            else i
            for i in await self.store.get_items(task_id)
        ]
        transitions = await self.store.get_transitions(task_id)
        pending = TransitionRow(
            seq=transitions[-1].seq + 1 if transitions else 1,
            item_id=item.item_id,
            attempt=attempt,
            from_state="verifying",
            to_state="done",
            reason=transition.reason,
            at=datetime.now(UTC),
        )
        await self._render(task_id, items, [*transitions, pending])
        ws = self.workspace(task_id)
        _, previous = await self.store.workspace_record(task_id)
        sha = await ws.commit(
            f"Item {item.item_id}: {item.title}\n\nVerified by `{item.verify_command}` (exit 0).",
            key,
        )
        return StepRecord(
            effect_key=key,
            step="verify",
            result={"command": result.as_json(), "outcome": "done", "commit": sha},
            item=dataclasses.replace(done, commit_sha=sha),
            transitions=[transition],
            # Equal when this step already recorded its checkpoint before a crash.
            checkpoint=None
            if sha == previous
            else Checkpoint(sha=sha, bundle=await ws.bundle_since(previous)),
        )

    async def _report(self, task_id: str, items: list[ItemRow] | None = None) -> JSON:
        """The final report from the stored items, the commits and the budget ledger."""
        return build_report(
            items if items is not None else await self.store.get_items(task_id),
            await self.workspace(task_id).files_changed_since_start(),
            await self.guard.budgets.budget_status(task_id),
        )

    async def _end(
        self,
        task_id: str,
        *,
        step: str,
        state: str,
        text: str,
        reason: str,
        metadata_patch: JSON | None = None,
    ) -> str:
        """End the run: the final state, its reason as the last progress entry, the report."""
        return await self.record(
            task_id,
            StepRecord(
                effect_key=f"{task_id}:task:{step}",
                step=step,
                result={},
                task_state=state,
                status_text=text,
                transitions=[Transition(to_state=state, reason=reason)],
                report=await self._report(task_id),
                metadata_patch=metadata_patch,
            ),
        )

    async def stop_for_budget(self, task_id: str, spent: Exhausted) -> JSON:
        """A clean stop: the plan stays as it is, a final entry says where and why."""
        await self._end(
            task_id,
            step="budget_stop",
            state="failed",
            text=f"Stopped: {spent.reason}",
            reason=f"stopped: {spent.reason}",
            metadata_patch={
                "failure": {
                    "reason": "budget_exhausted",
                    "dimension": spent.dimension,
                    "used": spent.used,
                    "limit": spent.limit,
                }
            },
        )
        return {"outcome": "stopped", "stopped": True, "attempt": 0}

    async def finish(self, task_id: str) -> JSON:
        summary = build_report(await self.store.get_items(task_id))["summary"]
        state = await self._end(
            task_id, step="finish", state="completed", text=f"Completed: {summary}", reason=summary
        )
        return {"state": state}

    async def fail(self, task_id: str, reason: str) -> JSON:
        """End the run as failed when it cannot go on (its reason goes to the caller)."""
        state = await self._end(
            task_id, step="fail", state="failed", text=f"Failed: {reason}", reason=reason
        )
        return {"state": state}
