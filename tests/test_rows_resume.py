"""Runs resume from their rows (issue 25): a run begun since the patch "rows" makes no DBOS
step. Killed (SIGKILL) right after a step is recorded, or after a step that asks a run to
start and before that run is enqueued, the run started again finds in the task's rows and
keyed effects what it did: nothing is done twice and nothing is lost."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from tests.support.a2a import a2a_client, item, plan_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env
from tests.support.processes import StartAgent
from tests.test_delegation import SURVEY, delegations_of, sends, survey_routes
from tests.test_pauses import data_message, plan_with, send_waiting, text_to
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
        # The round after item b: the run comes back before it, and names its next one anew.
        ("after-reverify", 2, ["re-verified 2 done item(s)", "re-verified 3 done item(s)"]),
        # The last round: the run comes back where it stood when the round ran, and replays it.
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
    server = start_agent("serve", "rows", A2A_AGENT_FAULT_FILE=str(fault))
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
    # The engine holds the run's patch marker and no step: the rows are the record.
    steps = rows(
        database_url,
        "SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid = %s",
        task.id,
    )
    assert steps == [("DBOS.patch-rows",)]


async def test_a_kill_before_a_child_run_is_enqueued_still_runs_it_once(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, tmp_path: Path
) -> None:
    """The model's `delegate` made a child run and its step was recorded; the worker dies
    before the child is enqueued (a run that resumes from rows enqueues apart from its
    workflow). The child still runs, once, and its parent completes."""
    fake.add(*survey_routes().entries)
    fault = tmp_path / "fault"
    fault.write_text("before-start")
    server = start_agent("serve", "rows-child", **model_env(fake), A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "survey", "items": [SURVEY]}}))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    assert sends(database_url, task.id) == [(1, "completed")]
    ((child_id, state),) = rows(
        database_url, "SELECT id, state FROM tasks WHERE parent_id = %s", task.id
    )
    assert state == "completed" and delegations_of(done)[0]["child"] == child_id
    assert_transitions_sound(database_url, child_id)


async def test_a_kill_after_an_answered_question_is_verified_leaves_the_tree_alone(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    """The segment an answer started applies it (answers/<item>.md) and verifies the item;
    killed after that, the segment runs again from its start and meets the answer's step
    again, which must not write the file again: the tree would no longer be what the later
    steps recorded, and the run would restore it and restart the item."""
    fault = tmp_path / "fault"
    server = start_agent("serve", "rows-answer", A2A_AGENT_FAULT_FILE=str(fault))
    items = [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        fault.write_text("after-verify_item")
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
