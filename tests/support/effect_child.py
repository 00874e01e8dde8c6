"""A child process that performs one keyed effect through the harness's effect helper.

    python -m tests.support.effect_child <database_url> <workspaces> <task_id> <ledger> die|finish

`die` exits the process in the middle of the effect (as a kill -9 would leave it: started,
not recorded); `finish` performs and records it. Each run appends its key to the ledger.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from a2a_agent.budget import BudgetGuard, Spend
from a2a_agent.harness.kernel.context import HarnessConfig, StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.pauses import PauseConfig, Pauses
from a2a_agent.harness.kernel.results import JSON, StepResult
from persistence.budgets import PostgresBudgets
from persistence.db import create_pool
from persistence.ledger import PostgresLedger
from persistence.records import StepRecord
from persistence.runs import PostgresRunStore


class NoWakeups:
    """Nobody cancels this task: the effect is only ever woken by its poll."""

    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Event]:
        yield asyncio.Event()

    def quiet_since(self, task_id: str, since: float) -> bool:
        return False


async def main(database_url: str, workspaces: Path, task_id: str, ledger: Path, mode: str) -> None:
    pool = create_pool(database_url, max_size=2)
    await pool.open(wait=True)
    guard = BudgetGuard(PostgresBudgets(pool), pause_pct=80, prices={})
    config = HarnessConfig(
        workspaces=workspaces,
        command_env={},
        command_timeout_s=60,
        output_tail_bytes=1000,
        executor_id=f"child-{os.getpid()}",
    )
    ctx = StepContext(PostgresRunStore(pool), PostgresLedger(pool), guard, config)
    effects = Effects(
        ctx,
        RunEndings(ctx),
        NoWakeups(),
        Pauses(ctx, PauseConfig(expires_s=3600.0, irreversible=[], pause_pct=80)),
    )
    key = effect_key(task_id, "run", scope="i0", attempt=1)
    view = await ctx.view(task_id, key=key, budget=True)
    effect = Effect(key, "run", "i0", 1, Spend(), integrity="none")

    async def perform() -> JSON:
        with ledger.open("a") as out:
            out.write(f"{key}\n")
        if mode == "die":
            os._exit(9)
        return {"command": {"done": True}}

    async def conclude(value: JSON, runs: int) -> Concluded:
        record = StepRecord(
            effect_key=key, step="run", result=value, runs=runs, item_id="i0", attempt=1
        )
        return Concluded(record, StepResult.ok(value), fingerprint=False)

    result = await effects.run(view, effect, perform, conclude)
    print(result.outcome, flush=True)
    await pool.close()


if __name__ == "__main__":
    url, workspaces, task, ledger_path, how = sys.argv[1:6]
    asyncio.run(main(url, Path(workspaces), task, Path(ledger_path), how))
