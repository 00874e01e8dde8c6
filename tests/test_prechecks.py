"""Checks that can fail: each item's verify runs once before the work; one that already
passes is weak, and the plan's policy says what follows (issue 13, part 1)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Role, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent
from tests.test_pauses import approval, plan_with, request_of, send_waiting
from tests.test_regressions import assert_counts_agree

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED


def text_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


def three_items() -> list[dict[str, Any]]:
    return [
        item("honest", "echo x > a.txt", "test -f a.txt"),
        item("weak", "true", "test -d ."),
        item("optout", "echo y > b.txt", "test -f b.txt", precheck=False),
    ]


def prechecks(task: Any) -> dict[str, dict[str, Any]]:
    found = {}
    for entry in plan_of(task)["items"]:
        for attempt in entry["history"]:
            if attempt["attempt"] == 0:
                found[entry["id"]] = attempt["precheck"]
    return found


async def test_weak_checks_are_flagged_and_the_honest_one_failed_first(
    start_agent: StartAgent, home: Path, database_url: str
) -> None:
    server = start_agent("serve", "pre-1")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(three_items()))
        done = await wait_for(client, task.id)
    assert done.status.state == COMPLETED
    checked = prechecks(done)
    assert checked["honest"]["result"] == "fails_before" and checked["honest"]["exitCode"] == 1
    assert checked["weak"]["result"] == "weak" and checked["weak"]["exitCode"] == 0
    assert checked["optout"] == {"result": "skipped", "why": "the item opted out"}
    # The counts agree: metadata, the report and the evidence in the plan artifact.
    counts = {
        "failedBeforePassedAfter": 1,
        "weak": 1,
        "precheckSkipped": 1,
        "notPrechecked": 0,
        "regressed": 0,
        "reopened": 0,
    }
    assert dict(MessageToDict(done.metadata)["verification"]) == counts
    assert assert_counts_agree(database_url, done) == counts  # and the evidence rows agree
    report = report_of(done)
    assert "Weak checks (passed before the work): weak." in report["summary"]
    assert {c["item"]: c["precheck"] for c in report["checksPassed"]} == {
        "honest": "fails_before",
        "weak": "weak",
        "optout": "skipped",
    }
    reasons = [
        r
        for (r,) in rows(database_url, "SELECT reason FROM transitions WHERE task_id = %s", done.id)
    ]
    assert any("weak check: `test -d .` already passes" in r for r in reasons)
    progress = (home / "workspaces" / done.id / "progress.md").read_text()
    assert "weak check" in progress and "weak (passed before any work): weak" in progress
    # Each pre-check ran once, as a recorded, keyed effect; the opt-out ran nothing and has
    # no step of its own (its first attempt's record says "skipped", as shown above).
    keys = rows(
        database_url,
        "SELECT key, runs FROM effects WHERE task_id = %s AND step = 'precheck' ORDER BY key",
        done.id,
    )
    found = [(k.rsplit(":", 3)[1], n) for k, n in keys]
    assert found == [("honest", 1), ("weak", 1)]
    # Nor is there a step for the plan's own check, which this plan does not have.
    steps = {
        name
        for (name,) in rows(
            database_url, "SELECT name FROM step_results WHERE task_id = %s", done.id
        )
    }
    assert {"precheck_item", "begin_attempt", "verify_item", "finish"} <= steps
    assert not steps & {"precheck_task", "accept_task"}


async def test_refuse_fails_the_weak_item_with_its_evidence(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "pre-2")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(three_items(), {"onWeakCheck": "refuse"}))
        done = await wait_for(client, task.id)
    assert done.status.state == FAILED
    assert "weak check" in done.status.message.parts[0].text
    items = {i["id"]: i for i in plan_of(done)["items"]}
    assert items["honest"]["status"] == "done"
    assert items["weak"]["status"] == "failed" and items["weak"]["attempts"] == 0
    assert items["optout"]["status"] == "pending"  # never reached
    counts = assert_counts_agree(database_url, done)
    assert (counts["weak"], counts["notPrechecked"], counts["failedBeforePassedAfter"]) == (1, 1, 1)


async def test_ask_waits_for_a_person_and_approval_goes_on(start_agent: StartAgent) -> None:
    server = start_agent("serve", "pre-3")
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(three_items(), {"onWeakCheck": "ask"}))
        asked = request_of(waiting)
        assert asked["kind"] == "weak_check" and asked["id"] == "weak.weak"
        assert asked["options"] == ["approve", "skip", "reject"]
        await send(client, approval(waiting.id, "weak.weak", "approve"))
        done = await wait_for(client, waiting.id, timeout=60)
        assert done.status.state == COMPLETED
        again = await send_waiting(client, plan_with(three_items(), {"onWeakCheck": "ask"}))
        await send(client, approval(again.id, "weak.weak", "skip"))
        skipped = await wait_for(client, again.id, timeout=60)
    items = {i["id"]: i for i in plan_of(skipped)["items"]}
    assert skipped.status.state == COMPLETED and items["weak"]["status"] == "skipped"


async def test_a_plan_level_check_decides_completion(start_agent: StartAgent) -> None:
    server = start_agent("serve", "pre-4")
    items = [
        item("a", "echo a > a.txt", "test -f a.txt"),
        item("b", "echo b > b.txt", "test -f b.txt"),
    ]
    async with a2a_client(server.url) as client:
        passing = await send(client, plan_with(items, verify="cat a.txt b.txt"))
        failing = await send(
            client, plan_with(items, verify="test -f c.txt || (echo no c; exit 3)")
        )
        ok, not_ok = await wait_for(client, passing.id), await wait_for(client, failing.id)
    assert ok.status.state == COMPLETED
    assert MessageToDict(ok.metadata)["acceptance"]["result"] == "passed"
    assert not_ok.status.state == FAILED
    text = not_ok.status.message.parts[0].text
    assert "every item passed its check, but the plan's acceptance check" in text
    assert "exited 3" in text and "no c" in text
    shown = MessageToDict(not_ok.metadata)["acceptance"]
    assert shown["result"] == "failed" and shown["exitCode"] == 3
    assert report_of(not_ok)["acceptance"]["result"] == "failed"
    assert {i["status"] for i in plan_of(not_ok)["items"]} == {"done"}


async def test_a_weak_check_in_the_models_plan_goes_back_to_it(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    weak = {"goal": "g", "items": [{"id": "w", "title": "Write w.txt", "verify": "test -d ."}]}
    honest = {
        "goal": "g",
        "items": [{"id": "w", "title": "Write w.txt", "verify": "test -f w.txt"}],
    }
    fake.add(
        tool_reply("submit_plan", weak),
        tool_reply("submit_plan", honest),
        tool_reply("write_file", {"path": "w.txt", "content": "w\n"}),
        text_reply("Wrote w.txt."),
    )
    server = start_agent("serve", "pre-5", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("write w.txt"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED
    told = json.dumps(fake.requests[1]["messages"][-1])
    assert "already passes before any work" in told and "test -d ." in told
    assert prechecks(done)["w"]["result"] == "fails_before"
