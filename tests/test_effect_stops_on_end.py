"""A running effect stops when its task ends, even when the task ended before the effect
began to watch for it (a cancel between the step's read of the task and the watch: its
NOTIFY reached no one). In process; the wakeups never fire, as for that missed NOTIFY, and
the poll is pushed out of reach, so only the first look can stop the effect."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import SimpleNamespace

import pytest

from a2a_agent.harness.kernel import effects
from a2a_agent.harness.kernel.effects import Effects
from a2a_agent.slots import StepSlots


class MissedWakeups:
    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Event]:
        yield asyncio.Event()  # never set


class Runs:
    def __init__(self, state: str) -> None:
        self.state = state

    async def state_of(self, task_id: str) -> str:
        await asyncio.sleep(0)  # a query's round trip: the command has started meanwhile
        return self.state


def effects_on(state: str) -> Effects:
    runner = Effects.__new__(Effects)
    runner.ctx = SimpleNamespace(  # type: ignore[assignment]
        runs=Runs(state), config=SimpleNamespace(step_slots=StepSlots(1))
    )
    runner.wakeups = MissedWakeups()
    return runner


async def test_an_effect_of_a_task_canceled_before_it_watched_is_stopped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(effects, "ENDED_POLL_S", 3600.0)
    stopped = asyncio.Event()

    async def command() -> dict[str, object]:
        try:
            await asyncio.Event().wait()  # a command that would run for ever
        finally:
            stopped.set()
        return {}

    result = await asyncio.wait_for(effects_on("canceled")._unless_ended("t", command), 30)
    assert result is None and stopped.is_set()


async def test_an_effect_of_a_working_task_runs_to_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(effects, "ENDED_POLL_S", 3600.0)

    async def command() -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"exit_code": 0}

    assert await effects_on("working")._unless_ended("t", command) == {"exit_code": 0}
