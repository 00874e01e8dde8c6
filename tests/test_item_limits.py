"""Per-item limits: a `run` command's own timeout, and a time limit for the whole item."""

from __future__ import annotations

import time

import pytest
from a2a.types.a2a_pb2 import TaskState
from a2a.utils.errors import InvalidParamsError

from tests.support.a2a import a2a_client, item, plan_message, plan_of, report_of, send, wait_for
from tests.support.processes import StartAgent


async def test_a_run_command_has_its_own_timeout(start_agent: StartAgent) -> None:
    server = start_agent()
    quick = item("quick", {"command": "sleep 20", "timeout_s": 1}, "true")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([quick]))
        started = time.monotonic()
        done = await wait_for(client, task.id, timeout=60)
    assert time.monotonic() - started < 15
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (shown,) = plan_of(done)["items"]
    run = next(h for h in shown["history"] if h["attempt"] == 1)["run"]
    assert run["exitCode"] == 124 and run["timedOut"] and run["command"] == "sleep 20"
    assert shown["run"] == "sleep 20" and shown["runTimeoutS"] == 1


async def test_the_whole_item_stops_at_its_time_limit(start_agent: StartAgent) -> None:
    server = start_agent()
    stubborn = item("stubborn", "sleep 1.5", "false", max_attempts=10, timeout_s=2)
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([stubborn, item("after", "true", "true")]))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_FAILED
    assert "used up its time limit of 2 s" in done.status.message.parts[0].text
    items = {i["id"]: i for i in plan_of(done)["items"]}
    assert items["stubborn"]["status"] == "failed" and items["stubborn"]["attempts"] < 10
    assert items["stubborn"]["history"][-1]["outcome"] == "out of time"
    assert items["after"]["status"] == "pending"
    assert report_of(done)["itemsFailed"] == ["stubborn"]


async def test_limits_above_the_servers_are_refused(start_agent: StartAgent) -> None:
    server = start_agent(A2A_AGENT_COMMAND_TIMEOUT_S="60")
    async with a2a_client(server.url) as client:
        for bad, message in [
            (item("a", {"command": "true", "timeout_s": 61}, "true"), "between 1 and 60"),
            (item("a", {"command": "true"}, {"command": "true", "timeout_s": 0}), "between 1"),
            (item("a", {"cmd": "true"}, "true"), "unknown field"),
            (item("a", "true", "true", timeout_s=1.5), "whole number"),
            ({"id": "a\n", "run": "true", "verify": "true"}, ".id must be"),
        ]:
            with pytest.raises(InvalidParamsError, match=message):
                await send(client, plan_message([bad]))
