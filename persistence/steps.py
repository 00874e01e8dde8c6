"""The run engine's side of the store: what each step of a segment's workflow returned.

A workflow that runs again after a crash is handed its steps' results in order instead of
running them again, as DBOS's step records did, at a fraction of their cost: one statement
to read a segment's results when its workflow starts, one to keep each step's (no commit
waits for the disk; see `record_step_result` in queries/steps.sql).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from persistence.db import Pool, read
from persistence.errors import StoreError
from persistence.sql import q


class NotOwner(StoreError):
    """The workflow was handed to another execution (a takeover): this one must stop."""


class WorkflowCancelled(StoreError):
    """The workflow was cancelled in the engine: no step of it is recorded any more."""


class StepClash(StoreError):
    """A step result is already kept at this position, under another name or by another
    execution of the same owner: the body did not take the path it took before."""


@dataclass(frozen=True)
class KeptStep:
    """A step's result as kept: `result` (the JSON the step returned), or its `failure`."""

    step_no: int
    name: str
    result: dict[str, Any] | None = None
    failure: str | None = None


@dataclass(frozen=True)
class SegmentRef:
    """Which workflow a step belongs to: the task's segment, its DBOS workflow id, and the
    owner token of the execution running it."""

    task_id: str
    segment: int
    workflow_id: str
    owner: str | None


class StepResults(Protocol):
    async def kept(self, task_id: str, segment: int) -> dict[int, KeptStep]:
        """The steps a segment has kept, by their number."""
        ...

    async def keep(self, ref: SegmentRef, step: KeptStep) -> None:
        """Keep one step's result; refused (`NotOwner`, `WorkflowCancelled`, `StepClash`)
        unless the execution still owns its workflow and the position is free."""
        ...


class PostgresStepResults:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def kept(self, task_id: str, segment: int) -> dict[int, KeptStep]:
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("step_results_of"), {"task_id": task_id, "segment": segment}, prepare=True
            )
            rows = await cur.fetchall()
        return {
            r["step_no"]: KeptStep(r["step_no"], r["name"], r["result"], r["failure"]) for r in rows
        }

    async def keep(self, ref: SegmentRef, step: KeptStep) -> None:
        # The result travels as the text json.dumps makes (the `json` type keeps it as
        # written), so a replay reads back what the step returned, key order included.
        result = None if step.result is None else json.dumps(step.result)
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("record_step_result"),
                {
                    "task_id": ref.task_id,
                    "segment": ref.segment,
                    "workflow_id": ref.workflow_id,
                    "owner": ref.owner,
                    "step_no": step.step_no,
                    "name": step.name,
                    "result": result,
                    "failure": step.failure,
                },
                prepare=True,
            )
            row = await cur.fetchone()
        if row is None or row["written"]:
            return
        if row["status"] is None:
            raise StoreError(f"workflow {ref.workflow_id} does not exist")
        if row["status"] == "CANCELLED":
            raise WorkflowCancelled(f"workflow {ref.workflow_id} was cancelled")
        if row["owner"] != ref.owner:
            raise NotOwner(f"workflow {ref.workflow_id} is run by another execution now")
        raise StepClash(
            f"step {step.step_no} of workflow {ref.workflow_id} is kept already"
            f" ({row['existing']}, not {step.name})"
        )
