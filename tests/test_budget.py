"""Budgets that belong to the run: each dimension trips at the right point, is charged once
per step across a crash, and a call that would cross the limit is never made."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from a2a_agent.budget import (
    DEFAULT_LIMITS,
    HARD_CAPS,
    crossings,
    effective_limits,
    exhausted,
)
from a2a_agent.errors import PlanError
from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent

FAILED = TaskState.TASK_STATE_FAILED
COMPLETED = TaskState.TASK_STATE_COMPLETED
PRICES = json.dumps({"*": {"input": 1000, "output": 1000, "cache_read": 0, "cache_write": 0}})


def budget_message(items: list[dict[str, Any]], budget: dict[str, Any]) -> Message:
    value = Value()
    value.struct_value.update({"plan": {"goal": "budgeted", "items": items}, "budget": budget})
    return Message(
        message_id=f"m-{time.monotonic_ns()}",
        role=Role.ROLE_USER,
        parts=[Part(data=value, media_type="application/json")],
    )


MODEL_ITEM = {"id": "work", "title": "Work with tools", "verify": "test -f done.txt"}


def failure_of(task: Task) -> dict[str, Any]:
    failure: dict[str, Any] = MessageToDict(task.metadata)["failure"]
    return failure


def budget_of(task: Task) -> dict[str, Any]:
    budget: dict[str, Any] = MessageToDict(task.metadata)["budget"]
    return budget


def charges(database_url: str, task_id: str) -> dict[str, Any]:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(tokens) FILTER (WHERE kind = 'model'), 0),"
            "       coalesce(sum(usd), 0)::float8,"
            "       count(*) FILTER (WHERE kind = 'reservation'),"
            "       coalesce(sum(actions), 0)"
            " FROM budget_charges WHERE task_id = %s",
            (task_id,),
        ).fetchone()
        calls = conn.execute(
            "SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens"
            " + cache_write_tokens), 0), count(*) FROM model_calls WHERE task_id = %s",
            (task_id,),
        ).fetchone()
        tools = conn.execute(
            "SELECT count(*) FROM effects WHERE task_id = %s AND step = 'tool'"
            " AND status = 'completed'",
            (task_id,),
        ).fetchone()
    assert row and calls and tools
    return {
        "model_tokens": int(row[0]),
        "usd": float(row[1]),
        "reservations": int(row[2]),
        "actions": int(row[3]),
        "call_tokens": int(calls[0]),
        "calls": int(calls[1]),
        "tools": int(tools[0]),
    }


async def run_to_end(server_url: str, message: Message, timeout: float = 60) -> Task:
    async with a2a_client(server_url) as client:
        task = await send(client, message)
        return await wait_for(client, task.id, timeout=timeout)


async def test_usd_limit_stops_before_the_call_that_would_cross_it(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    fake.add(*[tool_reply("bash", {"command": "true"}) for _ in range(20)])
    server = start_agent(
        "serve",
        "budget-usd",
        A2A_AGENT_PRICES=PRICES,
        A2A_AGENT_MODEL_MAX_TOKENS="256",
        **model_env(fake),
    )
    done = await run_to_end(server.url, budget_message([MODEL_ITEM], {"max_usd": 4.0}))
    assert done.status.state == FAILED
    assert failure_of(done)["dimension"] == "usd"
    assert "budget_exhausted: usd" in done.status.message.parts[0].text
    spent = charges(database_url, done.id)
    assert spent["reservations"] == 0
    assert spent["calls"] == fake.request_count and fake.remaining > 0
    assert spent["usd"] <= 4.0  # never over: the crossing call was not made
    # And the call that was not made would have crossed: its reservation (input and every
    # output token it may write) on top of what was used.
    failure = failure_of(done)
    assert failure["used"] + failure["reserved"] > 4.0 and failure["reserved"] > 0
    used = budget_of(done)["usd"]
    assert used["limit"] == 4.0 and abs(used["used"] - spent["usd"]) < 1e-6
    assert report_of(done)["budget"]["usd"]["used"] == used["used"]
    # The plan stays accurate: the item under way when the budget stopped the run says so.
    stopped = plan_of(done)["items"][0]
    assert stopped["status"] == "interrupted"
    assert stopped["history"][-1]["outcome"].startswith("interrupted: stopped: ")


async def test_token_limit(start_agent: StartAgent, fake: FakeAnthropic, database_url: str) -> None:
    fake.add(*[tool_reply("bash", {"command": "true"}) for _ in range(20)])
    server = start_agent("serve", "budget-tok", A2A_AGENT_MODEL_MAX_TOKENS="256", **model_env(fake))
    done = await run_to_end(server.url, budget_message([MODEL_ITEM], {"max_tokens": 6000}))
    assert failure_of(done)["dimension"] == "tokens"
    spent = charges(database_url, done.id)
    assert spent["model_tokens"] == spent["call_tokens"] <= 6000
    assert spent["calls"] == fake.request_count >= 2


async def test_actions_per_tool(start_agent: StartAgent, fake: FakeAnthropic) -> None:
    fake.add(*[tool_reply("bash", {"command": "true"}) for _ in range(5)])
    server = start_agent("serve", "budget-act", **model_env(fake))
    done = await run_to_end(
        server.url, budget_message([MODEL_ITEM], {"max_actions": {"bash": 2, "*": 50}})
    )
    failure = failure_of(done)
    assert failure["dimension"] == "actions.bash" and failure["limit"] == 2
    assert budget_of(done)["actionsByTool"]["bash"]["used"] == 2
    assert fake.request_count == 3  # the third bash call was asked for, and refused


async def test_steps_without_progress(start_agent: StartAgent, fake: FakeAnthropic) -> None:
    fake.add(*[tool_reply("bash", {"command": "true"}) for _ in range(10)])
    server = start_agent("serve", "budget-steps", **model_env(fake))
    done = await run_to_end(
        server.url, budget_message([MODEL_ITEM], {"max_steps_without_progress": 5})
    )
    failure = failure_of(done)
    assert failure["dimension"] == "stepsWithoutProgress" and failure["used"] == 5
    # the pre-check (a command, charged like one), model, tool, model, tool: the sixth step
    # (the next model call) was refused
    assert fake.request_count == 2


async def test_wall_clock_limit(start_agent: StartAgent, database_url: str, home: Path) -> None:
    server = start_agent("serve", "budget-wall")
    items = [item("slow", "sleep 1.5; touch a.txt", "test -f a.txt"), item("next", "true", "true")]
    async with a2a_client(server.url) as client:
        task = await send(client, budget_message(items, {"max_wall_s": 3600}))
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING})
        with psycopg.connect(database_url) as conn:  # the clock we control: two hours pass
            conn.execute(
                "UPDATE tasks SET created_at = created_at - interval '2 hours' WHERE id = %s",
                (task.id,),
            )
        done = await wait_for(client, task.id, timeout=30)
    failure = failure_of(done)
    assert failure["dimension"] == "wallS" and failure["used"] >= 7200
    plan = {i["id"]: i["status"] for i in plan_of(done)["items"]}
    assert plan["next"] == "pending"
    progress = (home / "workspaces" / task.id / "progress.md").read_text()
    assert "stopped: budget_exhausted: wall_s" in progress


@pytest.mark.processes
@pytest.mark.slow
async def test_alert_once_and_ledger_exact_across_a_kill(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    fake.add(
        *[tool_reply("bash", {"command": "true"}) for _ in range(4)],
        tool_reply("bash", {"command": "sleep 2"}),
        tool_reply("bash", {"command": "touch done.txt"}),
        text_reply("done.txt exists."),
    )
    server = start_agent("serve", "budget-k", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, budget_message([MODEL_ITEM], {"max_actions": {"*": 8}}))
    # 4 of 8 actions: the 50% alert is recorded before the fifth call; kill in its `sleep`.
    deadline = time.monotonic() + 30
    while True:
        with psycopg.connect(database_url) as conn:
            alerts = conn.execute(
                "SELECT count(*) FROM budget_alerts WHERE task_id = %s", (task.id,)
            ).fetchone()
            sleeping = conn.execute(
                "SELECT count(*) FROM effects WHERE key = %s", (f"{task.id}:work:1:tool.4.0",)
            ).fetchone()
        if alerts and alerts[0] and sleeping and sleeping[0]:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)
    server.kill()
    server = start_agent("serve", "budget-k", **model_env(fake))
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT dimension, threshold FROM budget_alerts WHERE task_id = %s", (task.id,)
        ).fetchall()
        texts = [
            r[0]
            for r in conn.execute(
                "SELECT body->>'text' FROM events WHERE task_id = %s AND body->>'kind' = 'status'",
                (task.id,),
            )
        ]
    assert rows == [("actions", 50)]
    assert sum("Budget alert: 50% of actions" in (t or "") for t in texts) == 1
    spent = charges(database_url, task.id)
    assert spent["reservations"] == 0
    assert spent["model_tokens"] == spent["call_tokens"]  # every call charged exactly once
    assert spent["actions"] == spent["tools"] == 6  # the re-run tool call charged once
    assert spent["calls"] == fake.request_count == 7  # no model call sent twice
    assert budget_of(done)["actions"]["used"] == 6


def test_caller_budgets_are_validated() -> None:
    assert effective_limits({"max_usd": 1.5}, DEFAULT_LIMITS, HARD_CAPS)["max_usd"] == 1.5
    merged = effective_limits({"max_actions": {"bash": 5}}, DEFAULT_LIMITS, HARD_CAPS)
    assert merged["max_actions"] == {"*": DEFAULT_LIMITS["max_actions"]["*"], "bash": 5}
    for bad, message in [
        ({"max_usd": HARD_CAPS["max_usd"] + 1}, "above this server's cap"),
        ({"max_usd": -1}, "more than 0"),
        ({"max_tokens": 1.5}, "whole number"),
        ({"max_dollars": 3}, "unknown field"),
        ({"max_actions": {"bash": 0}}, "more than 0"),
        ({"max_actions": {"*": HARD_CAPS["max_actions"]["*"] + 1}}, "above this server's cap"),
        ([], "must be an object"),
    ]:
        with pytest.raises(PlanError, match=message):
            effective_limits(bad, DEFAULT_LIMITS, HARD_CAPS)


def test_thresholds_and_exhaustion() -> None:
    status: dict[str, Any] = {
        "usd": {"used": 5.0, "limit": 10},
        "tokens": {"used": 100, "limit": 1000},
        "actions": {"used": 8, "limit": 10},
        "wall_s": {"used": 1, "limit": None},
        "limits": {"max_actions": {"bash": 3}},
        "actions_by_tool": {"bash": {"used": 2, "limit": 3}},
    }
    assert {(c.dimension, c.threshold) for c in crossings(status, 80)} == {
        ("usd", 50),
        ("actions", 50),
        ("actions", 80),
    }
    assert exhausted(status) is None
    spent = exhausted(status, usd=5.01)
    assert spent is not None and spent.dimension == "usd"
    assert exhausted(status, tool="bash") is None
    status["actions_by_tool"]["bash"]["used"] = 3
    spent = exhausted(status, tool="bash")
    assert spent is not None and spent.dimension == "actions.bash"


async def test_a_budget_of_a_few_cents_still_gets_its_calls_made(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    # At the default prices one call's full reservation (8192 output tokens) is 0.12 USD:
    # more than the whole budget. Each call is clamped to what is left instead.
    fake.add(tool_reply("bash", {"command": "touch done.txt"}), text_reply("done.txt exists."))
    server = start_agent("serve", "budget-cents", **model_env(fake))
    done = await run_to_end(server.url, budget_message([MODEL_ITEM], {"max_usd": 0.05}))
    assert done.status.state == COMPLETED, done.status.message
    asked = [r["max_tokens"] for r in fake.requests]
    assert all(1024 <= n < 8192 for n in asked), asked
    assert asked[1] <= asked[0]  # what is left only shrinks
    used = budget_of(done)["usd"]
    assert used["used"] <= 0.05 and used["reserved"] == 0


async def test_the_stop_says_whether_use_or_reservation_crossed(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    # Each call costs 0.03 USD; the floor call (1024 output tokens) needs 0.0154 on top.
    fake.add(*[tool_reply("bash", {"command": "true"}, input_tokens=10_000) for _ in range(5)])
    server = start_agent("serve", "budget-floor", **model_env(fake))
    done = await run_to_end(server.url, budget_message([MODEL_ITEM], {"max_usd": 0.05}))
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "the next model call needs up to" in text and "of the limit 0.05 is used" in text
    failure = failure_of(done)
    spent = charges(database_url, done.id)
    assert failure["dimension"] == "usd" and failure["used"] == pytest.approx(spent["usd"])
    assert failure["reserved"] > 0 and failure["used"] + failure["reserved"] > 0.05
    assert budget_of(done)["usd"]["used"] == pytest.approx(spent["usd"])


async def test_a_budget_too_small_for_one_call_is_refused_at_submission(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    server = start_agent("serve", "budget-tiny", **model_env(fake))
    async with a2a_client(server.url) as client:
        with pytest.raises(InvalidParamsError, match="too small for one model call"):
            await send(client, budget_message([MODEL_ITEM], {"max_usd": 0.001}))
        # A plan of commands only makes no model call: any budget will do.
        ok = await send(client, budget_message([item("a", "true", "true")], {"max_usd": 0.001}))
        done = await wait_for(client, ok.id)
    assert done.status.state == COMPLETED
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM tasks").fetchone() == (1,)
    assert fake.request_count == 0
