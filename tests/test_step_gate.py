"""The step gate at a shutdown: a step refused before it began is closed, not left behind;
a shutdown cut short still stops DBOS.

A worker draining for a shutdown lets no new step start; the run waits until its workflow is
cancelled. The harness coroutine made for that step was never awaited, and left to the
garbage collector it warned (`coroutine 'PlanHarness.verify_item' was never awaited`) in
whatever ran next in the process."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import pytest
from dbos import DBOS

from a2a_agent.engine.dbos_engine import DbosEngine
from a2a_agent.engine.gate import StepGate
from a2a_agent.engine.runner import PlanRunner
from a2a_agent.harness.kernel.results import StepResult
from a2a_agent.slots import StepSlots


async def _harness_step() -> StepResult:
    raise AssertionError("a step refused by a draining gate must not run")


async def _no_trace(task_id: str) -> None:
    return None


async def test_a_step_refused_by_a_draining_gate_is_closed_when_cancelled() -> None:
    gate = StepGate()
    assert await gate.drain(timeout_s=0.1)  # nothing in flight: drained at once
    runner = SimpleNamespace(gate=gate, step_slots=StepSlots(1), _trace_of=_no_trace, fault=None)
    step = _harness_step()
    waiting = asyncio.ensure_future(PlanRunner._gated(runner, "task-1", step))  # type: ignore[arg-type]
    await asyncio.sleep(0.05)
    assert not waiting.done()  # held at the gate
    assert inspect.getcoroutinestate(step) == inspect.CORO_CREATED
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    assert inspect.getcoroutinestate(step) == inspect.CORO_CLOSED


async def test_a_step_that_ran_is_left_as_it_ended() -> None:
    gate = StepGate()

    async def ok() -> StepResult:
        return StepResult.from_json({"outcome": "ok", "attempt": 0, "payload": {}})

    runner = SimpleNamespace(gate=gate, step_slots=StepSlots(1), _trace_of=_no_trace, fault=None)
    result = await PlanRunner._gated(runner, "task-1", ok())  # type: ignore[arg-type]
    assert result["outcome"] == "ok"
    assert gate.in_flight == 0


async def test_a_shutdown_cut_short_still_stops_dbos(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancel landing in the hand-over (the supervisor's end, the drain, the worker marked
    stopped) still stops DBOS: left launched, it was the one the next in-process server of
    the suite got, with the earlier test's database, and its runs' steps found no workflow."""
    engine = object.__new__(DbosEngine)

    async def cut_short() -> None:
        raise asyncio.CancelledError

    engine._hand_over = cut_short  # type: ignore[method-assign]
    stopped: list[bool] = []
    monkeypatch.setattr(DBOS, "destroy", lambda **_: stopped.append(True))
    with pytest.raises(asyncio.CancelledError):
        await engine.shutdown()
    assert stopped == [True]
