"""Is the workspace what the last recorded step left? If not, rebuild it from checkpoints."""

from __future__ import annotations

from a2a_agent.harness.kernel.results import JSON
from a2a_agent.harness.workspace.commands import kill_leftovers
from a2a_agent.harness.workspace.git_remote import GitRemote
from a2a_agent.harness.workspace.workspace import Workspace
from persistence.records import StepView
from persistence.runs import RunStore


async def check_workspace(
    runs: RunStore,
    ws: Workspace,
    view: StepView,
    *,
    in_flight: bool = False,
    compare_tree: bool = True,
    remote: GitRemote | None = None,
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
    origin = origin_of(view.seed)

    async def base(rebuilt: Workspace) -> None:
        # The checkpoints of a cloned repository build on its start commit, fetched again.
        if origin is not None and remote is not None:
            await remote.fetch_commit(
                rebuilt.root,
                str(origin["url"]),
                str(origin["commit"]),
                credential=origin.get("credential"),
            )

    await ws.restore(checkpoint, bundles, base)
    return f"{why}; restored checkpoint {checkpoint[:12]}"


def origin_of(seed: JSON | None) -> JSON | None:
    """The cloned repository a workspace's history starts from (its own, or that of the task
    it started from), which a restore fetches the start commit from; None if the checkpoints
    hold everything."""
    if not seed:
        return None
    if seed.get("kind") == "git":
        return seed if seed.get("commit") else None
    origin = seed.get("origin")
    return origin if isinstance(origin, dict) and origin.get("commit") else None
