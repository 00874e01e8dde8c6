"""The run engine's side of the store: what each step of a segment's workflow returned.

A workflow that runs again after a crash is handed its steps' results in order instead of
running them again, as DBOS's step records did, at a fraction of their cost: one statement
to read a segment's results when its workflow starts, and each step's kept by
`keep_step_result()` (functions.sql; no commit waits for the disk), mostly inside the next
step's view read rather than in a statement of its own (`WaitingKeep`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
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
        async with read(self._pool) as conn:
            cur = await conn.execute(q("record_step_result"), keep_params(ref, step), prepare=True)
            row = await cur.fetchone()
        check_kept(row, ref, step)


# keep_step_result()'s arguments in its order, as the queries name them.
KEEP_PARAMS = ("keep_task_id", "keep_segment", "keep_workflow_id", "keep_owner",
               "keep_step_no", "keep_name", "keep_result", "keep_failure")  # fmt: skip


def keep_params(ref: SegmentRef | None, step: KeptStep | None) -> dict[str, Any]:
    """`keep_step_result()`'s arguments as the queries name them (all NULL: keep nothing)."""
    if ref is None or step is None:
        return dict.fromkeys(KEEP_PARAMS)
    # The result travels as the text json.dumps makes (the `json` type keeps it as written),
    # so a replay reads back what the step returned, key order included.
    result = None if step.result is None else json.dumps(step.result)
    values = (ref.task_id, ref.segment, ref.workflow_id, ref.owner, step.step_no, step.name)
    return dict(zip(KEEP_PARAMS, (*values, result, step.failure), strict=True))


def check_kept(
    row: Mapping[str, Any] | None, ref: SegmentRef, step: KeptStep, *, prefix: str = ""
) -> None:
    """What `keep_step_result()` said of keeping `step`: nothing when it wrote it (or had,
    under the same name: a keep tried again after its answer was lost), else why not
    (`NotOwner`, `WorkflowCancelled`, `StepClash`). Its columns are named `prefix` and
    status, owner, written and existing."""
    if row is None or row[f"{prefix}written"]:
        return
    status, existing = row[f"{prefix}status"], row[f"{prefix}existing"]
    if status is None:
        raise StoreError(f"workflow {ref.workflow_id} does not exist")
    if status == "CANCELLED":
        raise WorkflowCancelled(f"workflow {ref.workflow_id} was cancelled")
    if row[f"{prefix}owner"] != ref.owner:
        raise NotOwner(f"workflow {ref.workflow_id} is run by another execution now")
    if existing == step.name:
        return  # this execution's own keep, whose answer was lost with its connection
    raise StepClash(
        f"step {step.step_no} of workflow {ref.workflow_id} is kept already"
        f" ({existing}, not {step.name})"
    )


class WaitingKeep:
    """A segment's last step result, not kept yet. Its keep travels with the segment's next
    statement where that is a step's view (`PostgresRunStore.view`, one round trip for both);
    otherwise it is kept on its own (`keep_waiting`) before the segment does anything else.
    A crash before it is kept costs what a crash between a step's record and its keep always
    did: the step runs again and finds its own records."""

    def __init__(self, ref: SegmentRef, keep: Callable[[KeptStep], Awaitable[None]]) -> None:
        self.ref = ref
        self._keep = keep
        self._step: KeptStep | None = None

    def wait(self, step: KeptStep) -> None:
        if self._step is not None:
            raise RuntimeError(f"step {self._step.step_no} is still waiting for its keep")
        self._step = step

    def take(self) -> KeptStep | None:
        step, self._step = self._step, None
        return step

    def put_back(self, step: KeptStep) -> None:
        """A keep taken for a statement that did not run (it failed before its answer)."""
        self._step = step

    async def keep(self) -> None:
        step = self.take()
        if step is not None:
            await self._keep(step)


# The keep waiting in the segment whose workflow runs in this context (the journal's).
_WAITING: ContextVar[WaitingKeep | None] = ContextVar("a2a_waiting_keep", default=None)


@contextmanager
def keeps_waiting(waiting: WaitingKeep) -> Iterator[None]:
    token = _WAITING.set(waiting)
    try:
        yield
    finally:
        _WAITING.reset(token)


def waiting_keep() -> WaitingKeep | None:
    """The segment's keep holder in this context, if any (None outside a journal segment)."""
    return _WAITING.get()


async def keep_waiting() -> None:
    """Keep the step result waiting in this context, if one is: before an effect or a record
    that no view read carried it ahead of."""
    waiting = _WAITING.get()
    if waiting is not None:
        await waiting.keep()
