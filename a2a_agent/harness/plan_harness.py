"""The work of one plan, as steps: each step does one effect and records it in one transaction.

Nothing here knows about DBOS. The engine wraps each public coroutine as a checkpointed step;
every method is safe to run again after a crash, because effects are keyed and records are
idempotent by that key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from a2a_agent.harness.commands import CommandResult, run_command
from a2a_agent.harness.render import plan_document, progress_document
from a2a_agent.harness.workspace import Workspace
from persistence.errors import NotFound
from persistence.records import (
    JSON,
    TERMINAL_STATES,
    ItemChange,
    ItemRow,
    StepRecord,
    Transition,
    TransitionRow,
)
from persistence.store import TaskStore


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
    def __init__(self, store: TaskStore, config: HarnessConfig) -> None:
        self.store = store
        self.config = config

    def workspace(self, task_id: str) -> Workspace:
        return Workspace(self.config.workspaces / task_id)

    async def _goal(self, task_id: str) -> str:
        row = await self.store.get_task(task_id, None)
        if row is None:
            raise NotFound(task_id)
        return row.plan["goal"] if row.plan else ""

    async def _render(
        self,
        task_id: str,
        items: list[ItemRow] | None = None,
        transitions: list[TransitionRow] | None = None,
    ) -> None:
        goal = await self._goal(task_id)
        items = items if items is not None else await self.store.get_items(task_id)
        if transitions is None:
            transitions = await self.store.get_transitions(task_id)
        self.workspace(task_id).write_files(
            plan_document(task_id, goal, items),
            progress_document(task_id, goal, items, transitions),
        )

    async def _item(self, task_id: str, item_id: str) -> ItemRow:
        for item in await self.store.get_items(task_id):
            if item.item_id == item_id:
                return item
        raise NotFound(f"{task_id}/{item_id}")

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
                    "max_attempts": i.max_attempts,
                }
                for i in items
            ],
        }

    async def begin_task(self, task_id: str) -> JSON:
        ws = self.workspace(task_id)
        await ws.ensure()
        outcome = await self.store.record_step(
            task_id,
            StepRecord(
                effect_key=f"{task_id}:task:begin",
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
            ),
        )
        await self._render(task_id)
        await ws.commit("Start task: plan.json and progress.md", f"{task_id}:task:begin")
        return {"stopped": outcome.task_state in TERMINAL_STATES}

    async def begin_attempt(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self._item(task_id, item_id)
        outcome = await self.store.record_step(
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
                        reason=f"started: {item.title}",
                    )
                ],
            ),
        )
        await self._render(task_id)
        return {"stopped": outcome.task_state in TERMINAL_STATES}

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
        effect = await self.store.start_effect(key, task_id, item.item_id, attempt, step)
        if effect.status == "completed" and effect.result is not None:
            return CommandResult.from_json(effect.result["command"])
        ws = self.workspace(task_id)
        await ws.ensure()
        env = {
            **self.config.command_env,
            "A2A_TASK_ID": task_id,
            "A2A_ITEM_ID": item.item_id,
            "A2A_ATTEMPT": str(attempt),
            "A2A_IDEMPOTENCY_KEY": key,
            "A2A_WORKSPACE": str(ws.root),
        }
        return await run_command(
            command,
            cwd=ws.root,
            env=env,
            timeout_s=timeout_s,
            tail_bytes=self.config.output_tail_bytes,
        )

    async def run_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self._item(task_id, item_id)
        key = idempotency_key(task_id, item_id, attempt, "run")
        if item.run is None:
            raise NotFound(f"item {item_id} has no run command")
        result = await self._command(
            task_id,
            item,
            attempt,
            step="run",
            command=item.run,
            timeout_s=self.config.command_timeout_s,
        )
        outcome = await self.store.record_step(
            task_id,
            StepRecord(
                effect_key=key,
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
        await self._render(task_id)
        return {"stopped": outcome.task_state in TERMINAL_STATES}

    async def verify_item(self, task_id: str, item_id: str, attempt: int) -> JSON:
        item = await self._item(task_id, item_id)
        key = idempotency_key(task_id, item_id, attempt, "verify")
        result = await self._command(
            task_id,
            item,
            attempt,
            step="verify",
            command=item.verify_command,
            timeout_s=item.verify_timeout_s,
        )
        evidence = _evidence(result)
        if result.passed:
            done = ItemChange(item_id=item_id, status="done", attempts=attempt, evidence=evidence)
            transition = Transition(
                item_id=item_id,
                attempt=attempt,
                from_state="verifying",
                to_state="done",
                reason=f"verified: `{item.verify_command}` exited 0",
            )
            sha = await self._checkpoint(task_id, item, done, transition, key)
            record = StepRecord(
                effect_key=key,
                step="verify",
                result={"command": result.as_json(), "outcome": "done"},
                item=dataclasses.replace(done, commit_sha=sha),
                transitions=[transition],
            )
        elif attempt < item.max_attempts:
            record = StepRecord(
                effect_key=key,
                step="verify",
                result={"command": result.as_json(), "outcome": "retry"},
                item=ItemChange(
                    item_id=item_id, status="in_progress", attempts=attempt + 1, evidence=evidence
                ),
                status_text=f"Item {item_id} failed verification; retrying "
                f"(attempt {attempt + 1} of {item.max_attempts})",
                task_state="working",
                transitions=[
                    Transition(
                        item_id=item_id,
                        attempt=attempt + 1,
                        from_state="verifying",
                        to_state="in_progress",
                        reason=f"verification `{item.verify_command}` exited {result.exit_code}; "
                        f"retrying, attempt {attempt + 1} of {item.max_attempts}",
                    )
                ],
            )
        else:
            why = (
                f"Item {item_id} failed verification after {attempt} attempt(s): "
                f"`{item.verify_command}` exited {result.exit_code}. Output tail:\n"
                f"{result.output_tail[-1500:]}"
            )
            record = StepRecord(
                effect_key=key,
                step="verify",
                result={"command": result.as_json(), "outcome": "failed"},
                item=ItemChange(
                    item_id=item_id, status="failed", attempts=attempt, evidence=evidence
                ),
                task_state="failed",
                status_text=why,
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
                report=await self._report(task_id, override=(item_id, "failed", evidence)),
            )
        outcome = await self.store.record_step(task_id, record)
        await self._render(task_id)
        if outcome.task_state in TERMINAL_STATES and outcome.task_state != "failed":
            return {"outcome": "stopped"}
        return {"outcome": outcome.result["outcome"]}

    async def _checkpoint(
        self, task_id: str, item: ItemRow, done: ItemChange, transition: Transition, key: str
    ) -> str:
        """Commit the workspace with plan.json/progress.md already showing the item done."""
        items = [
            dataclasses.replace(
                i, status=done.status, attempts=done.attempts, evidence=done.evidence
            )
            if i.item_id == item.item_id
            else i
            for i in await self.store.get_items(task_id)
        ]
        transitions = await self.store.get_transitions(task_id)
        pending = TransitionRow(
            seq=(transitions[-1].seq + 1) if transitions else 1,
            item_id=transition.item_id,
            attempt=transition.attempt,
            from_state=transition.from_state,
            to_state=transition.to_state,
            reason=transition.reason,
            at=datetime.now(UTC),
        )
        await self._render(task_id, items, [*transitions, pending])
        return await self.workspace(task_id).commit(
            f"Item {item.item_id}: {item.title}\n\nVerified by `{item.verify_command}` (exit 0).",
            key,
        )

    async def _report(self, task_id: str, override: tuple[str, str, JSON] | None = None) -> JSON:
        items = await self.store.get_items(task_id)
        statuses: dict[str, Any] = {i.item_id: (i.status, i.evidence) for i in items}
        if override is not None:
            statuses[override[0]] = (override[1], override[2])
        done = [i.item_id for i in items if statuses[i.item_id][0] == "done"]
        failed = [i.item_id for i in items if statuses[i.item_id][0] == "failed"]
        remaining = [i.item_id for i in items if statuses[i.item_id][0] not in ("done", "failed")]
        checks = [
            {
                "item": i.item_id,
                "command": i.verify_command,
                "exit_code": (statuses[i.item_id][1] or {}).get("exit_code"),
            }
            for i in items
            if statuses[i.item_id][0] == "done"
        ]
        summary = (
            f"{len(done)} of {len(items)} items done and verified"
            + (f"; failed: {', '.join(failed)}" if failed else "")
            + (f"; not reached: {', '.join(remaining)}" if remaining else "")
            + "."
        )
        return {
            "summary": summary,
            "items_done": done,
            "items_failed": failed,
            "checks_passed": checks,
            "remaining": remaining,
        }

    async def finish(self, task_id: str) -> JSON:
        report = await self._report(task_id)
        outcome = await self.store.record_step(
            task_id,
            StepRecord(
                effect_key=f"{task_id}:task:finish",
                step="finish",
                result={},
                task_state="completed",
                status_text=f"Completed: {report['summary']}",
                transitions=[
                    Transition(from_state="working", to_state="completed", reason=report["summary"])
                ],
                report=report,
            ),
        )
        await self._render(task_id)
        return {"state": outcome.task_state}

    async def fail(self, task_id: str, reason: str) -> JSON:
        """End the run as failed when it cannot go on (its reason goes to the caller)."""
        report = await self._report(task_id)
        outcome = await self.store.record_step(
            task_id,
            StepRecord(
                effect_key=f"{task_id}:task:fail",
                step="fail",
                result={},
                task_state="failed",
                status_text=f"Failed: {reason}",
                transitions=[Transition(to_state="failed", reason=reason)],
                report=report,
            ),
        )
        await self._render(task_id)
        return {"state": outcome.task_state}
