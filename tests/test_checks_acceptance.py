"""The plan's own check (issue 13, part 3): the model's planner is asked for one, and the one
it drafts runs after the last item and decides completion; and, like an item's check, it is
run once before any work, so one that already passes is flagged or refused."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_line
from tests.support.workflows import as_dbos_steps
from tests.test_pauses import plan_with
from tests.test_regressions import assert_counts_agree
from tests.test_restart import assert_transitions_sound

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED
PLAN_CHECK = "grep -qx done w.txt"


def text_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


def drafted(content: str) -> list[dict[str, Any]]:
    """The model's turns: a plan with an item check and a plan check, then the work, which
    writes `content` to w.txt (the item's check passes either way)."""
    plan = {
        "goal": "w.txt says done",
        "items": [{"id": "w", "title": "Write w.txt", "verify": "test -f w.txt"}],
        "verify": PLAN_CHECK,
    }
    return [
        tool_reply("submit_plan", plan),
        tool_reply("write_file", {"path": "w.txt", "content": content}),
        text_reply("Wrote w.txt."),
    ]


def acceptance_of(task: Task) -> dict[str, Any]:
    found: dict[str, Any] = MessageToDict(task.metadata)["acceptance"]
    return found


def effect_keys(database_url: str, task_id: str, step: str) -> list[tuple[str, int]]:
    return [
        (key.removeprefix(f"{task_id}:"), runs)
        for key, runs in rows(
            database_url,
            "SELECT key, runs FROM effects WHERE task_id = %s AND step = %s ORDER BY key",
            task_id,
            step,
        )
    ]


async def test_the_models_plan_check_runs_last_and_decides_completion(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    server = start_agent("serve", "acc-1", **model_env(fake))
    async with a2a_client(server.url) as client:
        fake.add(*drafted("not yet\n"))
        failing = await wait_for(client, (await send(client, text_message("say done"))).id)
        fake.add(*drafted("done\n"))
        passing = await wait_for(client, (await send(client, text_message("say done"))).id)
    # The planner was asked for an end-to-end check, and the plan tool takes one.
    planning = fake.requests[0]
    assert "end-to-end `verify`" in json.dumps(planning["system"])
    (submit,) = [t for t in planning["tools"] if t["name"] == "submit_plan"]
    assert "verify" in submit["input_schema"]["properties"]
    # Its item passed its check both times; the plan's check decided.
    for task in (failing, passing):
        assert {i["status"] for i in plan_of(task)["items"]} == {"done"}
        assert effect_keys(database_url, task.id, "acceptance") == [("plan:1:acceptance", 1)]
        assert acceptance_of(task)["command"] == PLAN_CHECK
        # It failed before the work too (w.txt did not exist): a check that can fail.
        assert acceptance_of(task)["precheck"]["result"] == "fails_before"
        assert_counts_agree(database_url, task)
    assert failing.status.state == FAILED
    text = failing.status.message.parts[0].text
    assert f"the plan's acceptance check `{PLAN_CHECK}` exited 1" in text
    assert acceptance_of(failing)["result"] == "failed"
    assert report_of(failing)["acceptance"]["result"] == "failed"
    assert passing.status.state == COMPLETED
    assert acceptance_of(passing)["result"] == "passed"
    assert acceptance_of(passing)["exitCode"] == 0


async def test_a_plan_check_that_passes_before_any_work_is_flagged(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    items = [item("a", "echo a > a.txt", "test -f a.txt")]
    server = start_agent("serve", "acc-2")
    async with a2a_client(server.url) as client:
        weak = await send(client, plan_with(items, verify="test -d ."))
        honest = await send(client, plan_with(items, verify="cat a.txt"))
        weak_done, honest_done = await wait_for(client, weak.id), await wait_for(client, honest.id)
    # warn (the default): the run goes on and completes, flagged.
    assert weak_done.status.state == COMPLETED
    shown = acceptance_of(weak_done)
    assert shown["result"] == "passed"
    assert shown["precheck"]["result"] == "weak" and shown["precheck"]["exitCode"] == 0
    reasons = [
        r
        for (r,) in rows(
            database_url, "SELECT reason FROM transitions WHERE task_id = %s", weak_done.id
        )
    ]
    assert any("the plan's acceptance check `test -d .` already passes" in r for r in reasons)
    progress = (home / "workspaces" / weak_done.id / "progress.md").read_text()
    assert "weak check: the plan's acceptance check `test -d .`" in progress
    assert honest_done.status.state == COMPLETED
    assert acceptance_of(honest_done)["precheck"]["result"] == "fails_before"
    assert acceptance_of(honest_done)["precheck"]["exitCode"] == 1
    # One run before the work (charged as a command), one after it.
    for task in (weak_done, honest_done):
        assert effect_keys(database_url, task.id, "precheck") == [
            ("a:0:precheck", 1),
            ("plan:0:acceptance.precheck", 1),
        ]
        charged = rows(
            database_url,
            "SELECT kind FROM budget_charges WHERE task_id = %s AND key = %s",
            task.id,
            f"{task.id}:plan:0:acceptance.precheck",
        )
        assert charged == [("command",)]
        assert_counts_agree(database_url, task)


async def test_refuse_fails_a_weak_plan_check_before_any_work(
    start_agent: StartAgent, database_url: str
) -> None:
    items = [item("a", "echo a > a.txt", "test -f a.txt")]
    server = start_agent("serve", "acc-3")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(items, {"onWeakCheck": "refuse"}, verify="true"))
        done = await wait_for(client, task.id)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "the plan's acceptance check `true` already passes" in text and "refuse" in text
    assert [i["status"] for i in plan_of(done)["items"]] == ["pending"]
    # Nothing of the plan was worked or even pre-checked; the plan's check never ran after.
    assert effect_keys(database_url, done.id, "precheck") == [("plan:0:acceptance.precheck", 1)]
    assert effect_keys(database_url, done.id, "acceptance") == []
    assert acceptance_of(done)["precheck"]["result"] == "weak"
    assert report_of(done)["acceptance"]["precheck"]["result"] == "weak"
    assert_transitions_sound(database_url, done.id)


@pytest.mark.processes
@pytest.mark.slow
async def test_a_run_begun_before_plan_prechecks_existed_replays_without_one(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    gate, ledger = home.parent / "go", home.parent / "old-run.log"
    run = (
        f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; '
        f"while [ ! -f {gate} ]; do sleep 0.1; done; echo a > a.txt"
    )
    server = start_agent("serve", "acc-old")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with([item("a", run, "test -f a.txt")], verify="cat a.txt"))
    wait_for_line(ledger, f"{task.id}:a:1:run")
    server.kill()
    # Make its history the one the code before this step recorded: the markers of the three
    # patches before it (not the one marker runs record now), DBOS's step records rather
    # than the journal's, no step and no effect of the plan's pre-check, and every later
    # step in its place after them (DBOS replays by position).
    with psycopg.connect(database_url) as conn:
        names = [
            n
            for (n,) in conn.execute(
                "SELECT name FROM step_results WHERE task_id = %s ORDER BY step_no", (task.id,)
            )
        ]
        assert names.index("snapshot") < names.index("precheck_task")  # once the plan is there
        as_dbos_steps(
            conn,
            task.id,
            ["checks-that-fail", "regressions", "publish"],
            leave_out={"precheck_task"},
        )
        key = f"{task.id}:plan:0:acceptance.precheck"
        conn.execute("DELETE FROM effects WHERE key = %s", (key,))
        conn.execute("DELETE FROM budget_charges WHERE key = %s", (key,))
        conn.execute(
            "UPDATE tasks SET policy = jsonb_set(policy, '{acceptance}', "
            "(policy -> 'acceptance') - 'precheck'), metadata = metadata - 'acceptance' "
            "WHERE id = %s",
            (task.id,),
        )
    gate.touch()
    server = start_agent("serve", "acc-old")
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    # Replayed as it began: the plan's check ran after the work and never before it.
    assert effect_keys(database_url, done.id, "precheck") == [("a:0:precheck", 1)]
    assert effect_keys(database_url, done.id, "acceptance") == [("plan:1:acceptance", 1)]
    shown = acceptance_of(done)
    assert shown["result"] == "passed" and "precheck" not in shown
    assert ledger.read_text().split().count(f"{task.id}:a:1:run") == 2
