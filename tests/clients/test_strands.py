"""Strands Agents' A2AAgent: A2A 0.3 (a2a-sdk <0.4), text parts only, always streaming, 300 s
timeout, no poll, resubscribe, cancel or push, and no way to name the task it answers. Its
plans travel as text, so this module's server has a (fake) model that plans the text's
PLAN-JSON as given (tests/clients/echo_model.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.clients.harness import (
    CANCELED,
    COMPLETED,
    QUICK_ITEMS,
    SSE_PING_S,
    Served,
    cancel_when_seen,
    check_record,
    expect,
    finish_driver,
    no_error,
    record_now,
    start_driver,
    tag,
)
from tests.clients.venvs import STRANDS, client_python

pytestmark = pytest.mark.clients
NEEDS_MODEL = True  # the client sends text only: the service plans it (tests/clients/echo_model.py)

CLIENT_TIMEOUT_S = 4 * SSE_PING_S  # Strands's 300 s, shortened
LONG_S = 2.5 * CLIENT_TIMEOUT_S  # over twice the client timeout: pings in between


@pytest.fixture(scope="module")
def python() -> Path:
    return client_python(STRANDS)


async def test_strands_a2a_agent_streams_a_plan_stops_at_a_question_and_sees_a_cancel(
    served: Served, python: Path
) -> None:
    mark = tag()
    scenarios = ["discover", "stream", "cancel", "input_required"]
    args = {"url": served.url, "key": served.key, "tag": mark, "scenarios": scenarios}
    started = time.monotonic()
    proc = start_driver(python, "drive_strands.py", args)
    canceled_id = await cancel_when_seen(served, f"cancel-{mark}")
    run = finish_driver(proc, "drive_strands.py", started, 120)
    print(f"drive_strands.py: {run.seconds:.1f} s")
    problems: list[str] = []
    no_error(problems, run, *scenarios)
    card = run.scenario("discover")
    expect(problems, card.get("protocol_version") == "0.3", f"card: {card}")

    stream = run.scenario("stream")
    expect(problems, stream.get("state") == "completed", f"stream: {stream}")
    expect(problems, stream.get("stop_reason") == "end_turn", f"stream: {stream}")
    await check_record(
        served, problems, "stream", stream.get("task_id"), state=COMPLETED, items=QUICK_ITEMS
    )

    cancel = run.scenario("cancel")
    expect(problems, cancel.get("task_id") == canceled_id, f"cancel: {cancel}")
    expect(problems, cancel.get("state") == "canceled", f"cancel: {cancel}")
    await check_record(served, problems, "cancel", canceled_id, state=CANCELED, items=[])

    # The question stops Strands with reason `interrupt`; its next call cannot name the
    # task, so it starts a new one and the first still waits for its answer.
    asked = run.scenario("input_required")
    expect(problems, asked.get("asked_state") == "input-required", f"ask: {asked}")
    expect(problems, asked.get("stop_reason") == "interrupt", f"ask: {asked}")
    again = asked.get("answer_call") or {}
    expect(problems, again.get("task_id") not in (None, asked.get("task_id")), f"{again}")
    if isinstance(asked.get("task_id"), str):
        waiting = await record_now(served, asked["task_id"])
        expect(
            problems,
            waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED,
            f"the question's task: {waiting.status.state}",
        )
    assert not problems, "\n".join(problems)


async def test_strands_stream_outlives_its_timeout_on_pings_until_the_task_ends(
    served: Served, python: Path
) -> None:
    args = {
        "url": served.url,
        "key": served.key,
        "tag": tag(),
        "long_s": LONG_S,
        "client_timeout_s": CLIENT_TIMEOUT_S,
        "scenarios": ["long"],
    }
    started = time.monotonic()
    long = finish_driver(
        start_driver(python, "drive_strands.py", args), "drive_strands.py", started, LONG_S + 90
    ).scenario("long")
    problems: list[str] = []
    expect(problems, "error" not in long, f"long: {long}")
    expect(problems, long.get("state") == "completed", f"long: {long}")
    expect(problems, long.get("seconds", 0) >= LONG_S, f"ended before the work did: {long}")
    await check_record(
        served, problems, "long", long.get("task_id"), state=COMPLETED, items=["slow"]
    )
    assert not problems, "\n".join(problems)
