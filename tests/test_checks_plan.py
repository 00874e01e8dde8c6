"""The plan's own check, checked before the work (issue 13, parts 1 and 3): what the pre-check
found is in the report whatever the ending, a model's plan whose check already passes goes
back to the model, and `onWeakCheck: ask` waits for a person before any work."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent
from tests.test_checks_acceptance import acceptance_of, effect_keys
from tests.test_pauses import approval, plan_with, request_of, send_waiting
from tests.test_prechecks import prechecks
from tests.test_regressions import assert_counts_agree, breaking_plan
from tests.test_restart import assert_transitions_sound

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED
WEAK_SAID = "The plan's own check passed before any work (weak)."


def text_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


def plan_precheck_runs(ledger: Path, task_id: str) -> int:
    """How often the plan's check ran before the work, from the commands' own ledger."""
    if not ledger.exists():
        return 0
    return ledger.read_text().split().count(f"{task_id}:plan:0:acceptance.precheck")


def ledgered(ledger: Path, check: str) -> str:
    """`check`, noting the key it runs under first."""
    return f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; {check}'


async def test_the_report_shows_the_plan_pre_check_whatever_the_ending(
    start_agent: StartAgent, database_url: str
) -> None:
    # (An item may not be named `plan` or `task`: those scope the run's own keys.)
    named_plan = [item("a", "echo a > a.txt", "test -f a.txt")]
    server = start_agent("serve", "plan-1")
    async with a2a_client(server.url) as client:
        weak = await send(client, plan_with(named_plan, verify="test -d ."))
        honest = await send(client, plan_with(named_plan, verify="cat a.txt"))
        regressing = await send(
            client, plan_with(breaking_plan(), {"onRegression": "fail"}, verify="test -f d.txt")
        )
        ended = [await wait_for(client, t.id, timeout=60) for t in (weak, honest, regressing)]
    weak_done, honest_done, regressed = ended
    # Completed: the report shows the plan's check as metadata.acceptance does, both runs.
    for task, before in ((weak_done, "weak"), (honest_done, "fails_before")):
        assert task.status.state == COMPLETED, task.status.message
        shown = report_of(task)["acceptance"]
        assert shown == acceptance_of(task)
        assert shown["result"] == "passed" and shown["precheck"]["result"] == before
        assert shown["command"] == ("test -d ." if before == "weak" else "cat a.txt")
        assert prechecks(task)["a"]["result"] == "fails_before"  # the item's own
        assert sorted(effect_keys(database_url, task.id, "precheck")) == [
            ("a:0:precheck", 1),
            ("plan:0:acceptance.precheck", 1),
        ]
        # The counts are the items' (the plan's check is not one): they agree with the rows.
        counts = assert_counts_agree(database_url, task)
        assert (counts["weak"], counts["failedBeforePassedAfter"]) == (0, 1)
    assert WEAK_SAID in report_of(weak_done)["summary"]
    assert WEAK_SAID in weak_done.status.message.parts[0].text
    assert WEAK_SAID not in report_of(honest_done)["summary"]
    # Failed by a regression before the plan's check ran after the work: its pre-check only.
    assert regressed.status.state == FAILED
    assert "no longer pass" in regressed.status.message.parts[0].text
    shown = report_of(regressed)["acceptance"]
    assert set(shown) == {"precheck"} and shown["precheck"]["result"] == "fails_before"
    assert shown["precheck"]["command"] == "test -f d.txt"
    assert effect_keys(database_url, regressed.id, "acceptance") == []
    assert_counts_agree(database_url, regressed)


def told_to_model(fake: FakeAnthropic, n: int) -> str:
    """What the n-th request to the model said last (a plan's errors, after a try)."""
    return json.dumps(fake.requests[n]["messages"][-1])


async def test_a_plan_check_in_the_models_plan_that_already_passes_goes_back_to_it(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    honest_item = [{"id": "w", "title": "Write w.txt", "verify": "test -f w.txt"}]
    fake.add(
        tool_reply("submit_plan", {"goal": "g", "items": honest_item, "verify": "test -d ."}),
        tool_reply(
            "submit_plan", {"goal": "g", "items": honest_item, "verify": "grep -qx w w.txt"}
        ),
        tool_reply("write_file", {"path": "w.txt", "content": "w\n"}),
        text_reply("Wrote w.txt."),
    )
    server = start_agent("serve", "plan-2", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("write w.txt"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    # The first plan went back: its own check passes already; its item's check does not.
    told = told_to_model(fake, 1)
    assert "The plan was not accepted" in told
    assert "the plan's own check (`verify`) `test -d .` already passes before any work" in told
    assert "item w:" not in told
    # Each try's checks ran once, as one keyed effect; the second plan is the one worked.
    assert effect_keys(database_url, done.id, "plancheck") == [
        ("plan:1:plancheck", 1),
        ("plan:2:plancheck", 1),
    ]
    (first,) = rows(
        database_url,
        "SELECT result FROM effects WHERE key = %s",
        f"{done.id}:plan:1:plancheck",
    )
    ran = {c.get("item", "plan"): c["command"]["exit_code"] for c in first[0]["checks"]}
    assert ran == {"w": 1, "plan": 0}
    assert acceptance_of(done)["command"] == "grep -qx w w.txt"
    assert acceptance_of(done)["result"] == "passed"
    assert acceptance_of(done)["precheck"]["result"] == "fails_before"


async def test_a_plan_check_that_always_passes_uses_up_the_planning_tries(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    weak = {"goal": "g", "items": [{"id": "w", "verify": "test -f w.txt"}], "verify": "true"}
    fake.add(tool_reply("submit_plan", weak), tool_reply("submit_plan", weak))
    server = start_agent("serve", "plan-3", A2A_AGENT_PLAN_TRIES="2", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("write w.txt"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "did not produce a valid plan in 2 tries" in text
    assert "the plan's own check (`verify`) `true` already passes" in text
    assert len(fake.requests) == 2
    assert rows(database_url, "SELECT count(*) FROM items WHERE task_id = %s", done.id) == [(0,)]


def asked_before_any_work(task: Task) -> dict[str, Any]:
    """The request of a run waiting on its plan's check, nothing of the plan touched yet."""
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [(i["status"], i["history"]) for i in plan_of(task)["items"]] == [("pending", [])]
    return request_of(task)


async def test_ask_waits_before_any_work_approve_goes_on_and_reject_fails(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    ledger = home.parent / "plan-check.log"
    items = [item("a", f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; echo a > a.txt', "cat a.txt")]
    asking = {"onWeakCheck": "ask"}
    server = start_agent("serve", "plan-4")
    async with a2a_client(server.url) as client:
        first = await send_waiting(
            client, plan_with(items, asking, verify=ledgered(ledger, "test -d ."))
        )
        asked = asked_before_any_work(first)
        assert asked["kind"] == "weak_check" and asked["id"] == "weak_plan_check"
        assert asked["options"] == ["approve", "reject"]  # nothing to skip
        assert "already passes before any work" in asked["summary"]
        assert asked["details"]["precheck"]["result"] == "weak"
        assert acceptance_of(first)["precheck"]["result"] == "weak"
        await send(client, approval(first.id, "weak_plan_check", "approve", note="known"))
        approved = await wait_for(client, first.id, timeout=60)
        second = await send_waiting(
            client, plan_with(items, asking, verify=ledgered(ledger, "test -d ."))
        )
        asked_before_any_work(second)
        await send(client, approval(second.id, "weak_plan_check", "reject"))
        rejected = await wait_for(client, second.id, timeout=60)
    # Approved: the work went on, flagged, and the plan's pre-check was not run again.
    assert approved.status.state == COMPLETED, approved.status.message
    assert [i["status"] for i in plan_of(approved)["items"]] == ["done"]
    assert report_of(approved)["acceptance"]["precheck"]["result"] == "weak"
    assert WEAK_SAID in report_of(approved)["summary"]
    assert plan_precheck_runs(ledger, approved.id) == 1
    assert effect_keys(database_url, approved.id, "acceptance") == [("plan:1:acceptance", 1)]
    # Rejected: the run failed before any work; nothing of the plan was run or checked.
    assert rejected.status.state == FAILED
    text = rejected.status.message.parts[0].text
    assert "the plan's acceptance check already passes before any work and was not approved" in (
        text
    )
    assert [(i["status"], i["attempts"]) for i in plan_of(rejected)["items"]] == [("pending", 0)]
    assert plan_precheck_runs(ledger, rejected.id) == 1
    assert f"{rejected.id}:a:1:run" not in ledger.read_text()
    assert effect_keys(database_url, rejected.id, "precheck") == [("plan:0:acceptance.precheck", 1)]
    assert effect_keys(database_url, rejected.id, "acceptance") == []
    assert report_of(rejected)["acceptance"]["precheck"]["result"] == "weak"
    for task in (approved, rejected):
        decided = rows(
            database_url,
            "SELECT kind, decision FROM pauses WHERE task_id = %s",
            task.id,
        )
        assert decided == [("weak_check", "approve" if task is approved else "reject")]
        assert_counts_agree(database_url, task)
        assert_transitions_sound(database_url, task.id)
    assert dict(MessageToDict(rejected.metadata)["verification"])["notPrechecked"] == 1
