"""Is the workspace what the last recorded step left? If not, rebuild it from checkpoints."""

from __future__ import annotations

from a2a_agent.harness.commands import kill_leftovers
from a2a_agent.harness.workspace import Workspace
from persistence.ledger import Ledger
from persistence.store import TaskStore


async def check_workspace(
    store: TaskStore,
    ledger: Ledger,
    ws: Workspace,
    task_id: str,
    *,
    key: str | None = None,
    compare_tree: bool = True,
) -> str | None:
    """None if the workspace may be used as it is; else restore it and say why.

    Whatever a dead incarnation left running here is killed first. A step whose effect
    (`key`) already started was in flight at a crash: it changed the workspace itself, so it
    re-runs on what it left, under the same key. Otherwise a workspace whose tree differs
    from the last step's record (`compare_tree`; off between the model's tool calls, which
    change it on purpose), or that lost its last checkpoint (a lost disk, another machine),
    is rebuilt from the checkpoint bundles; the caller restarts the item as a new attempt.
    """
    recorded, checkpoint = await store.workspace_record(task_id)
    kill_leftovers(ws.command_pid_file)
    ws.clear_stale_locks()
    if checkpoint is None:
        return None
    if await ws.has_commit(checkpoint):
        if not compare_tree:
            return None
        if key is not None:
            effect = await ledger.get_effect(key)
            if effect is not None and effect.status == "started":
                return None
        found = await ws.fingerprint()
        if recorded is None or found == recorded:
            return None
        why = f"the workspace changed outside the run (tree {found[:12]}, expected {recorded[:12]})"
    else:
        why = "the workspace is missing or does not hold the last checkpoint"
    bundles = [c.bundle for c in await store.get_checkpoints(task_id)]
    await ws.restore(checkpoint, bundles)
    return f"{why}; restored checkpoint {checkpoint[:12]}"
