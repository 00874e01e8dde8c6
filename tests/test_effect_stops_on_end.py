"""A running effect stops when its task ends, even when the task ended before the effect
began to watch for it (a cancel between the step's read of the task and the watch: its
NOTIFY reached no one). In process; the wakeups never fire, as for that missed NOTIFY, and
the poll is pushed out of reach, so only the first look can stop the effect."""

from __future__ import annotations

import asyncio
import contextlib
import time
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

    def quiet_since(self, task_id: str, since: float) -> bool:
        return False  # it heard nothing, and cannot vouch for the gap


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


class QuietWakeups:
    """A notifier that heard nothing of the task since the step read it, and wakes its
    watchers when `notify` is called (a NOTIFY that comes while the effect runs)."""

    def __init__(self) -> None:
        self.events: list[asyncio.Event] = []

    @contextlib.asynccontextmanager
    async def watch(self, task_id: str) -> AsyncIterator[asyncio.Event]:
        event = asyncio.Event()
        self.events.append(event)
        yield event

    def quiet_since(self, task_id: str, since: float) -> bool:
        return since > 0

    def notify(self) -> None:
        for event in self.events:
            event.set()


class CountedRuns(Runs):
    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.looks = 0

    async def state_of(self, task_id: str) -> str:
        self.looks += 1
        return await super().state_of(task_id)


async def test_after_a_quiet_read_the_effect_runs_without_a_look_until_woken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Nothing of the task was heard since the step read it: the first look (a round trip
    # every step) is left out. A NOTIFY that comes while the effect runs still stops it.
    monkeypatch.setattr(effects, "ENDED_POLL_S", 3600.0)
    runner, runs, wakeups = effects_on("working"), CountedRuns("working"), QuietWakeups()
    runner.ctx.runs = runs  # type: ignore[assignment]
    runner.wakeups = wakeups

    async def quick() -> dict[str, object]:
        await asyncio.sleep(0.01)
        return {"exit_code": 0}

    assert await runner._unless_ended("t", quick, time.monotonic()) == {"exit_code": 0}
    assert runs.looks == 0
    # The same without a read's time (0.0: not known): it looks first, as before.
    assert await runner._unless_ended("t", quick) == {"exit_code": 0}
    assert runs.looks == 1
    # Canceled while it runs: the NOTIFY wakes the watch, the look finds it ended.
    started, stopped = asyncio.Event(), asyncio.Event()

    async def endless() -> dict[str, object]:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return {}

    running = asyncio.ensure_future(runner._unless_ended("t", endless, time.monotonic()))
    await asyncio.wait_for(started.wait(), 10)
    assert runs.looks == 1
    runs.state = "canceled"
    wakeups.notify()
    assert await asyncio.wait_for(running, 30) is None and stopped.is_set()
    assert runs.looks == 2
