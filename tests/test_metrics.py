"""/metrics against runs driven here (issue 15, part 3): every counter equals what the rows
say, step durations are the steps' own (not a wait for a person), and no counter goes down
when retention deletes the rows it was counted from."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import psycopg
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent
from tests.support.receiver import receiver
from tests.test_observe import samples
from tests.test_pauses import approval, plan_with, request_of
from tests.test_prechecks import text_message
from tests.test_push import ALLOW, send_with_push
from tests.test_sources import data_message

WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    page = httpx.get(f"{url}/metrics", timeout=30)
    assert page.status_code == 200, page.text
    return samples(page.text)


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def bucket(found: Samples, step: str, le: str) -> float:
    return value(found, "a2a_step_duration_seconds_bucket", le=le, step=step)


COUNTERS = [
    ("a2a_model_calls_total", {}),
    ("a2a_model_tokens_total", {"kind": "input"}),
    ("a2a_model_tokens_total", {"kind": "output"}),
    ("a2a_model_cost_usd_total", {}),
    ("a2a_budget_stops_total", {}),
    ("a2a_push_deliveries_total", {"outcome": "delivered"}),
    ("a2a_push_deliveries_total", {"outcome": "failed"}),
    ("a2a_push_dead_letters_total", {}),
    ("a2a_steps_total", {"step": "run"}),
    ("a2a_steps_total", {"step": "verify"}),
    ("a2a_step_duration_seconds_count", {"step": "run"}),
    ("a2a_step_duration_seconds_sum", {"step": "run"}),
]


async def test_counters_match_the_rows_and_survive_retention(
    start_agent: StartAgent, database_url: str, fake: FakeAnthropic
) -> None:
    plan = {"goal": "g", "items": [{"id": "w", "title": "Write w", "verify": "test -f w"}]}
    fake.add(
        tool_reply("submit_plan", plan, input_tokens=1200, output_tokens=80),
        tool_reply("write_file", {"path": "w", "content": "w\n"}, input_tokens=900),
        text_reply("Done.", input_tokens=950, output_tokens=12),
    )
    env = {**model_env(fake), **ALLOW, "A2A_AGENT_PUSH_MAX_ATTEMPTS": "3"}
    server = start_agent("serve", f"metrics-{uuid.uuid4().hex[:6]}", **env)
    with receiver() as good, receiver() as bad:
        bad.otherwise = 500
        # The wall budget counts from the task's creation: the run that crosses it goes first
        # and is seen started before the others fill the worker, so its `sleep 4` runs to its
        # end and the stop comes after it (behind them in the queue it could cross before).
        async with a2a_client(server.url) as client:
            over_time = {
                "plan": {
                    "goal": "g",
                    "items": [item("x", "sleep 4", "true"), item("y", "true", "true")],
                },
                "budget": {"max_wall_s": 3},
            }
            stopped = await send(client, data_message(over_time))
        started = "SELECT 1 FROM effects WHERE task_id = %s AND item_id = 'x' AND step = 'run'"
        for _ in range(300):
            if rows(database_url, started, stopped.id):
                break
            await asyncio.sleep(0.05)
        pushed = await send_with_push(server.url, good.url, [item("p", "true", "true")])
        dead = await send_with_push(server.url, bad.url, [item("d", "true", "true")])
        async with a2a_client(server.url) as client:
            worked = await send(client, text_message("write w"))
            slow = await send(
                client,
                plan_message(
                    [item("s", "sleep 1.5", "true"), item("v", "touch v", "sleep 1.2; test -f v")]
                ),
            )
            # A step that waits for a person: its time is its own, not the wait.
            waiting = await send(client, plan_with([item("i", "true", "true", irreversible=True)]))
            asked = await wait_for(client, waiting.id, WAITING, timeout=60)
            await asyncio.sleep(3)
            await send(client, approval(waiting.id, request_of(asked)["id"], "approve"))
            for task in (pushed, dead, worked, slow, stopped, waiting):
                await wait_for(client, task.id, timeout=90)
        bad.wait_for(lambda: len(bad.received) >= 3)
        good.wait_for(
            lambda: (
                not rows(
                    database_url,
                    "SELECT 1 FROM push_configs p JOIN tasks t "
                    "ON t.id = p.task_id WHERE p.state = 'active' AND p.acked_seq < t.event_seq",
                )
            )
        )
    before = scrape(server.url)

    # Every counter is what the rows hold.
    ((calls, tokens_in, tokens_out),) = rows(
        database_url, "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM model_calls"
    )
    assert value(before, "a2a_model_calls_total") == calls == 3
    assert value(before, "a2a_model_tokens_total", kind="input") == tokens_in == 3050
    assert value(before, "a2a_model_tokens_total", kind="output") == tokens_out
    ((usd,),) = rows(
        database_url,
        "SELECT sum(usd) FROM budget_charges WHERE kind NOT IN ('reservation', 'child')",
    )
    assert usd > 0 and abs(value(before, "a2a_model_cost_usd_total") - float(usd)) < 1e-9
    assert value(before, "a2a_budget_stops_total") == 1
    ((delivered, failed, dead_lettered),) = rows(
        database_url, "SELECT sum(delivered), sum(failures), sum(dead_lettered) FROM push_configs"
    )
    assert value(before, "a2a_push_deliveries_total", outcome="delivered") == delivered > 0
    assert delivered == len({r.seq for r in good.accepted()})
    assert value(before, "a2a_push_deliveries_total", outcome="failed") == failed == 3
    assert value(before, "a2a_push_dead_letters_total") == dead_lettered == 1
    assert value(before, "a2a_push_configs", state="dead") == 1
    ((runs,),) = rows(
        database_url, "SELECT count(*) FROM effects WHERE step = 'run' AND status = 'completed'"
    )
    assert value(before, "a2a_steps_total", step="run") == runs == 6

    # Durations: `sleep 1.5` and `sleep 4` in (1, 5] seconds; the approved `true` under 1 s,
    # though it waited three seconds for its approval.
    assert bucket(before, "run", "1.0") == 4
    assert bucket(before, "run", "5.0") == bucket(before, "run", "+Inf") == 6
    assert value(before, "a2a_step_duration_seconds_count", step="run") == 6
    assert 5.5 <= value(before, "a2a_step_duration_seconds_sum", step="run") < 9
    # Steps nothing marked begun beforehand are timed too: v's pre-check (1.2 s) and check.
    assert bucket(before, "precheck", "5.0") - bucket(before, "precheck", "1.0") == 1
    assert bucket(before, "verify", "5.0") - bucket(before, "verify", "1.0") == 1

    # Retention deletes the rows; the counters stay where they were, the gauges follow.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM effects WHERE task_id = %s", (slow.id,))  # compaction
        conn.execute("DELETE FROM tasks")  # deletion, with every row of theirs
    after = scrape(server.url)
    for name, labels in COUNTERS:  # sums of seconds may differ in their last digit
        assert abs(value(after, name, **labels) - value(before, name, **labels)) < 1e-6, name
    for le in ("0.01", "1.0", "5.0", "+Inf"):
        assert bucket(after, "run", le) == bucket(before, "run", le)
    assert value(after, "a2a_tasks", state="completed") == 0
    assert value(after, "a2a_push_configs", state="dead") == 0
