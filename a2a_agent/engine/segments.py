"""A task's run is segments (one per wait for a person), each a DBOS workflow on one queue
partitioned by the task: their ids, and how they are enqueued."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from dbos import DBOS, SetEnqueueOptions, SetWorkflowID
from dbos._context import get_local_dbos_context  # the execution's owner token lives only there

from persistence.steps import SegmentRef

RUN_QUEUE = "a2a-runs"


def workflow_id(task_id: str, segment: int) -> str:
    """Segment 0 of a task's run has the task's id; segment n (after the n-th wait) its own."""
    return task_id if segment == 0 else f"{task_id}:s{segment}"


async def enqueue_segment(
    run_task: Callable[[str, int], Coroutine[Any, Any, str]], task_id: str, segment: int
) -> None:
    """Enqueue a segment of a task's run; one enqueued before is not run again (its workflow
    id is taken). The queue's partition is the task, and a partition runs one workflow at a
    time: a segment started while an earlier one still runs (a delegate that ended before
    the run reached its wait, a run recovered after a crash while a peer's end was taken in)
    waits for it to end, so two segments never work one workspace at once."""
    with (
        SetWorkflowID(workflow_id(task_id, segment)),
        SetEnqueueOptions(queue_partition_key=task_id),
    ):
        await DBOS.enqueue_workflow_async(RUN_QUEUE, run_task, task_id, segment)


def segment_of(workflow: str | None) -> int | None:
    if workflow is None:
        return None
    head, _, tail = workflow.rpartition(":s")
    return int(tail) if head and tail.isdigit() else 0


def running_segment(task_id: str, segment: int) -> SegmentRef:
    """The segment whose workflow runs here, with the owner token DBOS gave this execution
    (what DBOS's own step records check before they write; a takeover gives a new one)."""
    workflow = DBOS.workflow_id
    if workflow is None:
        raise RuntimeError("not in a workflow")
    owner = getattr(get_local_dbos_context(), "owner_xid", None)
    if owner is None:
        raise RuntimeError(f"DBOS gave workflow {workflow} no owner token")
    return SegmentRef(task_id, segment, workflow, str(owner))
