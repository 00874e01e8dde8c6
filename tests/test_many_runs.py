"""Many runs at once on one worker (issue 25): hundreds of model-worked runs admitted together,
each effect done once; and runs whose commands are long do not hold the others' model turns.

A real worker process (its defaults, unless a test sets one) and the fake Messages API over
HTTP, answering each call after a set latency: the model calls bash once per item (appending
the step's key to a ledger outside the workspaces), then ends its turn."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.support.a2a import a2a_client, item, plan_message, send
from tests.support.db import rows
from tests.support.fake_anthropic import JSON, FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent

pytestmark = [pytest.mark.slow, pytest.mark.processes]


def model_answer(ledger: Path, latency: float) -> Any:
    command = f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; touch "done-$A2A_ITEM_ID.txt"'

    def answer(body: JSON) -> JSON:
        content = body["messages"][-1].get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return text_reply("Done.", delay=latency)
        return tool_reply("bash", {"command": command}, delay=latency)

    return answer


def model_plan(n: int) -> Any:
    worked = {"id": "i0", "title": "Write done-i0.txt", "verify": "test -f done-i0.txt"}
    return plan_message([{**worked, "precheck": False}], f"many {n}")


async def send_all(url: str, messages: list[Any]) -> list[str]:
    """Sent twenty at a time, as an orchestrator fanning out would."""
    ids: list[str] = []
    async with a2a_client(url) as client:
        for start in range(0, len(messages), 20):
            batch = messages[start : start + 20]
            ids += [t.id for t in await asyncio.gather(*(send(client, m) for m in batch))]
    return ids


def states(database_url: str, ids: list[str]) -> Counter[str]:
    sql = "SELECT state, count(*) FROM tasks WHERE id = ANY(%s) GROUP BY state"
    return Counter({str(state): int(n) for state, n in rows(database_url, sql, ids)})


def most_at_once(database_url: str, ids: list[str]) -> int:
    """The most runs that were working at one moment: from each task's move to working to its
    end, as its transitions record them."""
    with psycopg.connect(database_url) as conn:
        spans = conn.execute(
            "SELECT min(at) FILTER (WHERE to_state = 'working'),"
            " max(at) FILTER (WHERE to_state IN ('completed', 'failed', 'canceled'))"
            " FROM transitions WHERE task_id = ANY(%s) AND item_id IS NULL GROUP BY task_id",
            (ids,),
        ).fetchall()
    moments = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    most = now = 0
    for _, step in moments:
        now += step
        most = max(most, now)
    return most


async def until_ended(database_url: str, ids: list[str], timeout: float) -> Counter[str]:
    deadline = time.monotonic() + timeout
    while True:
        now = states(database_url, ids)
        if sum(now[s] for s in ("completed", "failed", "canceled")) == len(ids):
            return now
        assert time.monotonic() < deadline, f"unfinished after {timeout} s: {now}"
        await asyncio.sleep(0.2)


async def test_two_hundred_model_worked_runs_on_one_worker_each_effect_once(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    fake.add(*[model_answer(ledger, latency=1.0)] * 400)
    server = start_agent("serve", "many", **model_env(fake))
    ids = await send_all(server.url, [model_plan(n) for n in range(200)])
    ended = await until_ended(database_url, ids, timeout=240)
    assert ended == Counter({"completed": 200}), ended
    # Admitted together: far more runs under way at once than the 4 a worker once took
    # (how many of them wait on the model at one moment depends on the cores' load).
    at_once = most_at_once(database_url, ids)
    assert at_once >= 40, (at_once, fake.max_in_flight)
    assert fake.request_count == 400 and fake.remaining == 0
    # Every tool call ran once, under its own key, and is the effect the record holds.
    keys = ledger.read_text().split()
    assert len(keys) == 200 and len(set(keys)) == 200
    with psycopg.connect(database_url) as conn:
        effects = conn.execute(
            "SELECT key, status, runs FROM effects WHERE step = 'tool' AND task_id = ANY(%s)",
            (ids,),
        ).fetchall()
    assert sorted(k for k, _, _ in effects) == sorted(keys)
    assert {(status, runs) for _, status, runs in effects} == {("completed", 1)}
    assert {key.split(":")[0] for key in keys} == set(ids)


async def test_long_commands_do_not_hold_the_other_runs_model_turns(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, tmp_path: Path
) -> None:
    """Four runs whose commands sleep for minutes, on a worker with two command slots that a
    command gives up after a second: six model-worked runs sent after them go through their
    model turns, their bash calls and their checks, and end, while the four still sleep."""
    ledger = tmp_path / "ledger.txt"
    fake.add(*[model_answer(ledger, latency=0.2)] * 12)
    server = start_agent(
        "serve",
        "long",
        A2A_AGENT_COMMAND_CONCURRENCY="2",
        A2A_AGENT_COMMAND_SLOT_S="1",
        **model_env(fake),
    )
    sleeper = [item("sleep", "sleep 600", "true", precheck=False)]
    sleepers = await send_all(server.url, [plan_message(sleeper, f"long {n}") for n in range(4)])

    def sleeping() -> int:
        sql = (
            "SELECT count(*) FROM effects WHERE step = 'run' AND status = 'started'"
            " AND task_id = ANY(%s)"
        )
        return int(rows(database_url, sql, sleepers)[0][0])

    deadline = time.monotonic() + 60
    while sleeping() < 4:
        assert time.monotonic() < deadline, states(database_url, sleepers)
        await asyncio.sleep(0.2)
    ids = await send_all(server.url, [model_plan(n) for n in range(6)])
    ended = await until_ended(database_url, ids, timeout=90)
    assert ended == Counter({"completed": 6}), ended
    assert len(ledger.read_text().split()) == 6
    # The four still sleep: the others did not wait for them.
    assert states(database_url, sleepers) == Counter({"working": 4})
    assert sleeping() == 4
