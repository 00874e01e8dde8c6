"""The step journal: each harness step of a segment's workflow, numbered in the order the body
takes it, its result kept in our own table rather than as a DBOS step.

DBOS's step record (a check and a record per step, through SQLAlchemy in a thread) was a
third of a worker's CPU and about 3 ms of each step's bookkeeping (bench/concurrent_runs.py,
bench/checkpoint_overhead.py). The journal keeps DBOS's semantics with one statement per
step: a workflow run again is handed its steps' results in order (a failed step's failure
raised again) and runs live from the first step not kept; a step interrupted before its
result was kept runs again and finds its own records (the `inside-<step>` crash points); an
execution that lost its workflow to another (a takeover) or whose workflow was cancelled in
DBOS stops at its next step, with DBOS's own errors, as DBOS's step records made it stop.

A step's result is kept by the next step's own view read where that step reads its view
before anything else (`view_first`; `WaitingKeep` in persistence/steps.py), in the same
statement: the keep costs no statement of its own, and an execution that lost its workflow
still learns it before the next step's first effect. Before any other step, at the
segment's end and before a failure is kept, it is kept on its own.

The workflow itself, its queue, its recovery, patches and the enqueues made from the body
stay DBOS's; runs begun before the journal replay from DBOS's step records (`PlanRunner`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from dbos import error as dbos_error

from persistence.errors import StoreUnavailable
from persistence.steps import (
    KeptStep,
    NotOwner,
    SegmentRef,
    StepResults,
    WaitingKeep,
    WorkflowCancelled,
    keeps_waiting,
)

JSON = dict[str, Any]
T = TypeVar("T")
log = logging.getLogger(__name__)


class StepFailed(Exception):
    """A step that failed when it first ran, handed back by a replay: its failure again."""


def failure_reason(exc: BaseException) -> str:
    """Why a step failed, as the run's failure says it (the same words when replayed)."""
    return str(exc) if isinstance(exc, StepFailed) else f"{type(exc).__name__}: {exc}"


@dataclass(frozen=True)
class OutageRetry:
    """Steps retry only while the database is unreachable (about four minutes in all); any
    other error is a real failure of the step and ends the run with its reason."""

    attempts: int = 12
    interval_s: float = 1.0
    backoff: float = 1.5

    async def run(self, attempt: Callable[[], Awaitable[T]], what: str) -> T:
        wait = self.interval_s
        for n in range(1, self.attempts + 1):
            try:
                return await attempt()
            except StoreUnavailable:
                if n == self.attempts:
                    raise
                log.warning("%s: the database is unavailable; trying again in %.1f s", what, wait)
                await asyncio.sleep(wait)
                wait *= self.backoff
        raise AssertionError("unreachable")


@dataclass
class _Segment:
    ref: SegmentRef
    kept: dict[int, KeptStep]
    waiting: WaitingKeep  # the last step's result until it is kept
    taken: int = 0  # steps the body has taken so far


_running: ContextVar[_Segment | None] = ContextVar("a2a_journal_segment", default=None)


class StepJournal:
    def __init__(
        self,
        results: StepResults,
        retry: OutageRetry | None = None,
        *,
        view_first: frozenset[str] = frozenset(),
    ) -> None:
        """`view_first`: the steps that read their view (`RunStore.view`) before they write
        or start anything, so the last step's result may be kept by that read: one statement
        a step fewer. Before any other step it is kept on its own."""
        self._results = results
        self._retry = retry or OutageRetry()
        self._view_first = view_first

    @staticmethod
    def active() -> bool:
        """Whether the workflow running here keeps its steps in the journal."""
        return _running.get() is not None

    @asynccontextmanager
    async def segment(self, ref: SegmentRef) -> AsyncIterator[None]:
        """The body of one segment's workflow (`ref`: which, and the execution's owner
        token): its kept steps read once, then handed back in order."""
        kept = await self._retry.run(
            lambda: self._results.kept(ref.task_id, ref.segment),
            f"reading the steps of {ref.workflow_id}",
        )
        current = _Segment(ref, kept, WaitingKeep(ref, lambda step: self._keep(current, step)))
        token = _running.set(current)
        try:
            with keeps_waiting(current.waiting):
                yield
                await current.waiting.keep()
        except Exception:
            # The body failed: its last step's result is kept if it can be
            # (a step not kept runs again when the workflow does, and finds its records).
            with contextlib.suppress(Exception):
                await current.waiting.keep()
            raise
        finally:
            _running.reset(token)

    async def step(self, name: str, run: Callable[[], Awaitable[JSON]]) -> JSON:
        """One step: its kept result if the segment took it before, else run it (again
        while the database is away; `run` makes a new attempt each call) and keep what it
        returned or why it failed."""
        current = _running.get()
        if current is None:
            raise RuntimeError(f"step {name} outside a segment of the journal")
        current.taken += 1
        number = current.taken
        kept = current.kept.pop(number, None)
        if kept is not None:
            if kept.name != name:
                raise StepFailed(
                    f"the run's step {number} was {kept.name} and is now {name}: the run "
                    "cannot go on from its record"
                )
            if kept.failure is not None:
                raise StepFailed(kept.failure)
            assert kept.result is not None  # the table's check: one of the two
            return kept.result
        if name not in self._view_first:
            await current.waiting.keep()  # before the step does anything
        try:
            result = await self._retry.run(run, f"step {name}")
        except Exception as exc:
            await current.waiting.keep()
            await self._keep(current, KeptStep(number, name, failure=failure_reason(exc)))
            raise
        await current.waiting.keep()  # where the step read no view that took it
        # Kept by the next step's view read, or on its own before anything else runs.
        current.waiting.wait(KeptStep(number, name, result=result))
        return result

    async def _keep(self, current: _Segment, step: KeptStep) -> None:
        ref = current.ref
        try:
            await self._retry.run(
                lambda: self._results.keep(ref, step), f"keeping step {step.name}"
            )
        except NotOwner:
            # DBOS's own error for an execution that lost its workflow: it stops here and
            # leaves the run to the execution that took it.
            raise dbos_error.DBOSWorkflowConflictIDError(ref.workflow_id) from None
        except WorkflowCancelled:
            raise dbos_error.DBOSWorkflowCancelledError(
                f"Workflow {ref.workflow_id} is cancelled. Aborting function."
            ) from None
