"""Kill -9 at named points of a run (crash points in `PlanRunner`): right after a step, its
result waiting for the journal's keep (`after-<step>`: the step runs again and finds its own
records), and after our record inside the step (`inside-<step>`); the third, `before-start`,
is in tests/test_delegation.py. The run started again does nothing twice, loses nothing, and
still waits where a person must answer (a weak check's request included: its pre-check, run
again, asks nothing twice and lets nothing of the item run).

These were written for runs that resume from our rows instead of DBOS's step records (tried
this session, not landed: docs/measured.md); the same points hold for the DBOS replay."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, tool_reply
from tests.support.processes import AgentProcess, StartAgent
from tests.support.workflows import workflow_status
from tests.test_pauses import (
    WAITING,
    approval,
    goal_message,
    plan_with,
    request_of,
    send_waiting,
    text_to,
)
from tests.test_restart import assert_transitions_sound

COMPLETED = TaskState.TASK_STATE_COMPLETED
pytestmark = [pytest.mark.processes, pytest.mark.slow]


def rounds_of(database_url: str, task_id: str) -> list[str]:
    """The re-verification rounds on record, as their transitions say (the commit cut off)."""
    found = rows(
        database_url,
        "SELECT reason FROM transitions WHERE task_id = %s AND reason LIKE 're-verified%%' "
        "ORDER BY seq",
        task_id,
    )
    return [reason.split(" at ")[0] for (reason,) in found]


@pytest.mark.parametrize(
    "case",
    [
        ("after-run_item", 2, ["re-verified 2 done item(s)", "re-verified 3 done item(s)"]),
        ("after-reverify", 2, ["re-verified 2 done item(s)", "re-verified 3 done item(s)"]),
        ("after-reverify", None, ["re-verified 3 done item(s)"]),
    ],
    ids=["after run_item", "after a round between items", "after the last round"],
)
async def test_a_kill_right_after_a_step_is_recorded_does_nothing_twice(
    start_agent: StartAgent,
    database_url: str,
    tmp_path: Path,
    case: tuple[str, int | None, list[str]],
) -> None:
    point, every, rounds = case
    fault, ledger = tmp_path / "fault", tmp_path / "runs.log"
    fault.write_text(point)
    plan = [
        item(x, f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; echo {x} > {x}.txt', f"test -f {x}.txt")
        for x in "abc"
    ]
    server = start_agent("serve", "crash", A2A_AGENT_FAULT_FILE=str(fault))
    policy = {"reverifyEvery": every} if every else {}
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, policy))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    ran = Counter(ledger.read_text().split())
    assert ran == {f"{task.id}:{x}:1:run": 1 for x in "abc"}
    assert rounds_of(database_url, task.id) == rounds
    assert_transitions_sound(database_url, task.id)


async def test_a_kill_as_an_answer_is_applied_leaves_the_tree_alone(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    """The segment an answer started applies it (answers/<item>.md); killed after that
    step's record and before DBOS's, the step runs again, and must not write the file
    again: the tree would no longer be what its record says, and the run would restore it
    and restart the item."""
    fault = tmp_path / "fault"
    server = start_agent("serve", "crash-answer", A2A_AGENT_FAULT_FILE=str(fault))
    items = [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        fault.write_text("inside-apply_decision")
        await send(client, text_to(waiting.id, "Call it Heron."))
        done = await wait_for(client, waiting.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    reasons = [r for (r,) in rows(database_url, "SELECT reason FROM transitions "
                                  "WHERE task_id = %s", done.id)]  # fmt: skip
    assert not [r for r in reasons if "outside the run" in r or "restored" in r], reasons
    assert [i["attempts"] for i in plan_of(done)["items"]] == [1]
    answer = home / "workspaces" / done.id / "answers" / "name.md"
    assert "Call it Heron." in answer.read_text()
    assert_transitions_sound(database_url, done.id)


# ---- steps met again after later records -----------------------------------------------------


async def _recovered(database_url: str, server: AgentProcess, fault: Path, workflow: str) -> None:
    """Wait for the kill, then for the recovered segment's body to have ended (DBOS says
    SUCCESS: it returned, paused or ended)."""
    for _ in range(600):
        if not fault.exists() and "killed by signal 9" in server.log():
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the worker was never killed")
    for _ in range(600):
        if await workflow_status(database_url, workflow) == "SUCCESS":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"workflow {workflow} was not recovered")


async def test_a_kill_after_a_verified_item_still_establishes_its_facts(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    """Killed right after an item with facts is verified (done), the run comes back with the
    item done: the facts it establishes once verified must still be established."""
    fault = tmp_path / "fault"
    fault.write_text("after-verify_item")
    server = start_agent("serve", "crash-facts", A2A_AGENT_FAULT_FILE=str(fault))
    items = [item("probe", "echo p > p.txt", "test -f p.txt",
                  facts=[{"key": "version", "check": "echo v1"}])]  # fmt: skip
    async with a2a_client(server.url) as client:
        done = await wait_for(client, (await send(client, plan_with(items))).id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    found = rows(database_url, "SELECT value, source FROM facts WHERE task_id = %s", done.id)
    assert found == [("v1", "item probe")]


async def test_a_kill_after_an_item_keeps_the_round_the_policy_asks_after_it(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    """reverifyEvery 2: killed right after item b (the second) is verified, the run comes
    back with b done; the round due after b must still run, as it does without the kill."""
    fault = tmp_path / "fault"
    # Item b's own command names the crash point: the kill comes after b's verification.
    plan = [
        item("a", "echo a > a.txt", "test -f a.txt"),
        item("b", f"echo after-verify_item > {fault}; echo b > b.txt", "test -f b.txt"),
        item("c", "echo c > c.txt", "test -f c.txt"),
    ]
    server = start_agent("serve", "crash-round", A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"reverifyEvery": 2}))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    assert rounds_of(database_url, task.id) == [
        "re-verified 2 done item(s)",
        "re-verified 3 done item(s)",
    ]


async def test_a_kill_after_the_plans_own_check_does_not_run_the_last_round_again(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    """The last round is recorded, then the plan's own check; killed right after that check,
    the run comes back past the round and must not run (and record) a new last round."""
    fault = tmp_path / "fault"
    fault.write_text("after-accept_task")
    plan = [item(x, f"echo {x} > {x}.txt", f"test -f {x}.txt") for x in "ab"]
    server = start_agent("serve", "crash-last", A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, verify="test -f a.txt && test -f b.txt"))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    assert rounds_of(database_url, task.id) == ["re-verified 2 done item(s)"]
    assert_transitions_sound(database_url, task.id)


async def test_a_kill_after_a_weak_check_asks_leaves_the_item_waiting(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    """onWeakCheck ask: the item's pre-check passes before any work, the run asks and the
    worker is killed right after. The run comes back to the pre-check, which must still wait
    for the person: nothing of the item may run before the answer."""
    fault, ledger = tmp_path / "fault", tmp_path / "runs.log"
    fault.write_text("after-precheck_item")
    plan = [item("weak", f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}', "test -d .")]
    server = start_agent("serve", "crash-weak", A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"onWeakCheck": "ask"}))
        await _recovered(database_url, server, fault, task.id)
        ((state,),) = rows(database_url, "SELECT state FROM tasks WHERE id = %s", task.id)
        assert (state, ledger.exists()) == ("input_required", False)
        await send(client, approval(task.id, "weak.weak", "approve"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert Counter(ledger.read_text().split()) == {f"{task.id}:weak:1:run": 1}


@pytest.mark.parametrize("point", ["after-accept_plan", "after-review_plan"])
async def test_a_kill_after_the_model_plans_still_waits_for_the_review(
    start_agent: StartAgent,
    fake: FakeAnthropic,
    database_url: str,
    tmp_path: Path,
    point: str,
) -> None:
    """reviewPlan: the model's plan is accepted, then waits for a person's review. Killed
    right after the plan is accepted, or right after the review is asked, the run comes back
    with the plan's items on record: it must still wait for the review before any work."""
    ledger, fault = tmp_path / "ledger", tmp_path / "fault"
    fault.write_text(point)
    run = f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}'
    planned = {"id": "one", "title": "one", "run": run, "verify": f"test -f {ledger}"}
    fake.add(tool_reply("submit_plan", {"goal": "one file", "items": [planned]}))
    server = start_agent("serve", "crash-plan", **model_env(fake), A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, goal_message("Write one file", {"reviewPlan": True}))
        await _recovered(database_url, server, fault, task.id)
        ((state,),) = rows(database_url, "SELECT state FROM tasks WHERE id = %s", task.id)
        assert (state, ledger.exists()) == ("input_required", False)
        waiting = await wait_for(client, task.id, WAITING, timeout=30)
        assert request_of(waiting)["id"] == "plan_review"
        await send(client, text_to(task.id, "approve"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert Counter(ledger.read_text().split()) == {f"{task.id}:one:1:run": 1}
