"""Is the workspace what the last recorded step left? If not, rebuild it from checkpoints."""

from __future__ import annotations

from a2a_agent.harness.commands import kill_leftovers
from a2a_agent.harness.workspace import Workspace
from persistence.records import StepView
from persistence.runs import RunStore


async def check_workspace(
    runs: RunStore,
    ws: Workspace,
    view: StepView,
    *,
    in_flight: bool = False,
    compare_tree: bool = True,
) -> str | None:
    """None if the workspace may be used as it is; else restore it and say why.

    Whatever a dead incarnation left running here is killed first. A step whose effect was
    in flight here at a crash (`in_flight`) changed the workspace itself, so it re-runs on
    what it left, under the same key. Otherwise a workspace whose tree differs from the
    last step's record (`compare_tree`; off between the model's tool calls, which change it
    on purpose), or that lost its last checkpoint (a lost disk, another machine), is rebuilt
    from the checkpoint bundles; the caller restarts the item as a new attempt.
    """
    for pid_file in ws.pid_files():
        kill_leftovers(pid_file)
    ws.clear_stale_locks()
    checkpoint = view.checkpoint_sha
    if checkpoint is None:
        return None
    if compare_tree and not in_flight and view.fingerprint is not None:
        # The fingerprint covers HEAD: equal means the recorded checkpoint is still there.
        found = await ws.fingerprint()
        if found == view.fingerprint:
            return None
        if await ws.has_commit(checkpoint):
            expected = view.fingerprint[:12]
            why = f"the workspace changed outside the run (tree {found[:12]}, expected {expected})"
        else:
            why = "the workspace is missing or does not hold the last checkpoint"
    elif await ws.has_commit(checkpoint):
        return None
    else:
        why = "the workspace is missing or does not hold the last checkpoint"
    bundles = [c.bundle for c in await runs.checkpoints(view.task_id)]
    await ws.restore(checkpoint, bundles)
    return f"{why}; restored checkpoint {checkpoint[:12]}"
