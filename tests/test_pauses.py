"""Human checkpoints through A2A: a run that asks, waits as a row, and resumes on a reply.

Every test drives a real server with the a2a-sdk client and reads the record (rows, the
workspace, its git history) as a person would.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import CancelTaskRequest, Message, Part, Role, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.struct_pb2 import Value

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent

WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
FAST_SUPERVISOR = {"A2A_AGENT_HEARTBEAT_TIMEOUT_S": "1.5", "A2A_AGENT_RECONCILE_INTERVAL_S": "1"}


def data_message(
    payload: dict[str, Any], *, task_id: str = "", text: str | None = None, message_id: str = ""
) -> Message:
    value = Value()
    value.struct_value.update(payload)
    parts = [Part(text=text)] if text else []
    parts.append(Part(data=value, media_type="application/json"))
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=parts,
    )


def text_to(task_id: str, text: str, message_id: str = "") -> Message:
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=[Part(text=text)],
    )


def plan_with(
    items: list[dict[str, Any]], policy: dict[str, Any] | None = None, **extra: Any
) -> Message:
    plan: dict[str, Any] = {"goal": "pauses", "items": items, **extra}
    if policy is not None:
        plan["policy"] = policy
    return data_message({"plan": plan})


def approval(task_id: str, pause_id: str | None, decision: str, **extra: Any) -> Message:
    body: dict[str, Any] = {"decision": decision, **extra}
    if pause_id is not None:
        body["id"] = pause_id
    return data_message({"approval": body}, task_id=task_id)


def request_of(task: Task) -> dict[str, Any]:
    """The approvalRequest DataPart of a waiting task's status message."""
    for data in get_data_parts(task.status.message.parts):
        if "approvalRequest" in data:
            return dict(data["approvalRequest"])
    raise AssertionError(f"task {task.id} carries no approval request: {task.status.message}")


def ledger_runs(ledger: Path) -> Counter[str]:
    return Counter(ledger.read_text().split()) if ledger.exists() else Counter()


def git_clean(workspace: Path) -> bool:
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=workspace, capture_output=True, text=True, check=True
    )
    return status.stdout.strip() == ""


def keyed(ledger: Path) -> str:
    return f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}'


async def send_waiting(client: Client, message: Message) -> Task:
    task = await send(client, message)
    return await wait_for(client, task.id, WAITING, timeout=60)


async def test_irreversible_item_waits_then_runs_once_under_its_own_key(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    server = start_agent("serve", "pause-1")
    items = [
        item("a", keyed(ledger), "true"),
        item("deploy", keyed(ledger), "true", irreversible=True),
        item("c", f"sleep 1; {keyed(ledger)}", "true"),
    ]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        asked = request_of(waiting)
        assert asked["id"] == "irreversible.deploy"
        assert asked["kind"] == "irreversible_action"
        assert asked["options"] == ["approve", "skip", "reject"]
        assert asked["expiresAt"] and asked["summary"]
        assert "Waiting for a person" in waiting.status.message.parts[0].text
        (pending,) = plan_of(waiting)["decisions"]
        assert (pending["id"], pending["status"]) == ("irreversible.deploy", "pending")
        # Nothing of the item ran while it waited; the item before it did.
        assert ledger_runs(ledger) == Counter({f"{waiting.id}:a:1:run": 1})

        reply = approval(waiting.id, "irreversible.deploy", "approve", note="go ahead")
        resumed = await send(client, reply)
        assert resumed.status.state == TaskState.TASK_STATE_WORKING
        # The same message again: applied once, the task comes back as it is.
        again = await send(client, reply)
        assert again.id == waiting.id and again.status.state != TaskState.TASK_STATE_INPUT_REQUIRED
        # The same decision in a new message: refused, says so, changes nothing.
        with pytest.raises(InvalidParamsError, match="already decided: approve"):
            await send(client, approval(waiting.id, "irreversible.deploy", "approve"))
        done = await wait_for(client, waiting.id, timeout=60)
        assert done.status.state == COMPLETED, done.status.message
        (past,) = plan_of(done)["decisions"]
        assert (past["status"], past["decision"], past["note"], past["how"]) == (
            "decided",
            "approve",
            "go ahead",
            "reply",
        )
        assert past["decidedAt"] and past["options"] == ["approve", "skip", "reject"]
        with pytest.raises(InvalidParamsError, match="already decided"):
            await send(client, approval(waiting.id, "irreversible.deploy", "reject"))

    key = f"{waiting.id}:deploy:1:run"
    assert ledger_runs(ledger)[key] == 1  # the paused step ran once, under its original key
    assert rows(database_url, "SELECT runs, status FROM effects WHERE key = %s", key) == [
        (1, "completed")
    ]
    assert rows(
        database_url,
        "SELECT kind, decision, note, decided_how, message_id FROM pauses WHERE task_id = %s",
        waiting.id,
    ) == [("irreversible_action", "approve", "go ahead", "reply", reply.message_id)]
    states = [
        r[0]
        for r in rows(
            database_url,
            "SELECT to_state FROM transitions WHERE task_id = %s AND item_id IS NULL ORDER BY seq",
            waiting.id,
        )
    ]
    assert states[:4] == ["submitted", "working", "input_required", "completed"] or (
        "input_required" in states and states[-1] == "completed"
    )
    workspace = home / "workspaces" / waiting.id
    progress = (workspace / "progress.md").read_text()
    assert "asks (irreversible action `irreversible.deploy`)" in progress
    assert "approve by" in progress and "go ahead" in progress
    assert git_clean(workspace)
    history = rows(
        database_url, "SELECT jsonb_array_length(history) FROM tasks WHERE id = %s", waiting.id
    )
    assert history == [(2,)]  # the submission and the one reply, not its repeat


async def test_replies_that_cannot_apply_are_refused_and_change_nothing(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    server = start_agent("serve", "pause-2")
    items = [item("slow", "sleep 2", "true"), item("risky", "true", "true", irreversible=True)]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(items))
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING})
        with pytest.raises(InvalidParamsError, match="has asked nothing"):
            await send(client, approval(task.id, None, "approve"))
        waiting = await wait_for(client, task.id, WAITING, timeout=30)
        before = rows(database_url, "SELECT history, state FROM tasks WHERE id = %s", task.id)
        with pytest.raises(InvalidParamsError, match=r"no request `nope`.*irreversible.risky"):
            await send(client, approval(task.id, "nope", "approve"))
        with pytest.raises(InvalidParamsError, match="not an option"):
            await send(client, approval(task.id, "irreversible.risky", "maybe"))
        with pytest.raises(InvalidParamsError, match="start the text with one of"):
            await send(client, text_to(task.id, "hmm, not sure"))
        assert rows(database_url, "SELECT history, state FROM tasks WHERE id = %s", task.id) == (
            before
        )
        assert rows(database_url, "SELECT decision FROM pauses WHERE task_id = %s", waiting.id) == [
            (None,)
        ]
        # A text that starts with an option is a decision; "skip" leaves the item undone.
        await send(client, text_to(task.id, "skip: not this week"))
        done = await wait_for(client, task.id, timeout=30)
    assert done.status.state == COMPLETED
    assert [i["status"] for i in plan_of(done)["items"]] == ["done", "skipped"]
    assert report_of(done)["itemsSkipped"] == ["risky"]


async def test_a_command_matching_an_irreversible_pattern_waits_and_a_reject_stops(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    server = start_agent("serve", "pause-3", A2A_AGENT_IRREVERSIBLE=r"\bDANGER\b")
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(
            client, plan_with([item("x", f"echo DANGER >> {ledger}", "true")])
        )
        asked = request_of(waiting)
        assert asked["id"] == "command.x.1.run" and asked["options"] == ["approve", "reject"]
        assert asked["details"]["pattern"] == r"\bDANGER\b"
        await send(client, text_to(waiting.id, "reject: never on a Friday"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == FAILED
    assert "reject" in done.status.message.parts[0].text
    assert not ledger.exists()  # the command never ran
    # x waited for its approval when the reject ended the run: interrupted, not left over.
    assert report_of(done)["itemsInterrupted"] == ["x"] and report_of(done)["remaining"] == []
    # The report says the person's decision ended it, and names x refused, not interrupted.
    assert report_of(done)["stoppedAt"]["request"] == "command.x.1.run"
    assert "refused by the caller: x" in report_of(done)["summary"]


async def test_repeated_failure_asks_and_a_retry_carries_on(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    server = start_agent("serve", "pause-4")
    items = [
        item("fix", f"if [ -f {flag} ]; then touch fixed; fi", "test -f fixed", max_attempts=1),
        item("never", "true", "false", max_attempts=1),
    ]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items, {"onItemFailure": "ask"}))
        asked = request_of(waiting)
        assert asked["kind"] == "repeated_failure" and asked["id"] == "failure.fix.1"
        assert asked["options"] == ["retry", "skip", "stop"]
        assert asked["details"]["verify"]["exitCode"] == 1
        flag.touch()
        await send(client, approval(waiting.id, "failure.fix.1", "retry", note="flag is set"))
        second = await wait_for(client, waiting.id, WAITING, timeout=30)
        assert request_of(second)["id"] == "failure.never.1"
        await send(client, text_to(waiting.id, "skip"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED
    plan = {i["id"]: i for i in plan_of(done)["items"]}
    assert plan["fix"]["status"] == "done" and plan["fix"]["attempts"] == 2
    assert plan["never"]["status"] == "skipped"
    decided = rows(
        database_url, "SELECT id, decision FROM pauses WHERE task_id = %s ORDER BY id", done.id
    )
    assert decided == [("failure.fix.1", "retry"), ("failure.never.1", "skip")]


async def test_a_retry_that_fails_again_asks_again_under_a_new_id(
    start_agent: StartAgent, database_url: str
) -> None:
    """The second ask was named as the first (by the count of failures, which the retry
    took one back from): already decided, so every answer was refused and the run waited
    until canceled."""
    server = start_agent("serve", "pause-4b")
    items = [item("stubborn", "true", "false", max_attempts=1)]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items, {"onItemFailure": "ask"}))
        assert request_of(waiting)["id"] == "failure.stubborn.1"
        await send(client, text_to(waiting.id, "retry please"))  # the task works on at once
        asked = request_of(await wait_for(client, waiting.id, WAITING, timeout=30))
        assert asked["id"] == "failure.stubborn.2" and "failed all 2 attempt(s)" in asked["summary"]
        await send(client, text_to(waiting.id, "skip"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED
    decided = rows(
        database_url, "SELECT id, decision FROM pauses WHERE task_id = %s ORDER BY id", done.id
    )
    assert decided == [("failure.stubborn.1", "retry"), ("failure.stubborn.2", "skip")]


async def test_question_item_stores_the_answer_and_verifies_it(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent("serve", "pause-5")
    items = [{"id": "name", "title": "Pick a name", "ask": "What should the service be called?"}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        asked = request_of(waiting)
        assert asked["kind"] == "question" and "called" in asked["summary"]
        await send(client, text_to(waiting.id, "Call it Heron."))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert "Call it Heron." in (workspace / "answers" / "name.md").read_text()
    entry = plan_of(done)["items"][0]
    answered = next(h for h in entry["history"] if h["attempt"] == 1)
    assert entry["status"] == "done" and answered["work"]["answer"] == "Call it Heron."
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.split()
    assert "answers/name.md" in tracked and git_clean(workspace)


async def test_a_request_nobody_answers_expires_to_its_default(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    server = start_agent("serve", "pause-6", **FAST_SUPERVISOR)
    items = [item("push", keyed(ledger), "true", irreversible=True)]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items, {"approvalExpiresS": 1}))
        assert request_of(waiting)["onExpiry"] == "reject"
        done = await wait_for(client, waiting.id, timeout=30)
        assert done.status.state == FAILED
        with pytest.raises(InvalidParamsError, match="because it expired"):
            await send(client, approval(waiting.id, "irreversible.push", "approve"))
    assert rows(
        database_url, "SELECT decision, decided_how FROM pauses WHERE task_id = %s", done.id
    ) == [("reject", "expired")]
    assert not ledger.exists()


async def test_cancel_while_waiting_closes_the_record(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent("serve", "pause-7")
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(
            client, plan_with([item("gate", "true", "true", irreversible=True)])
        )
        await client.cancel_task(CancelTaskRequest(id=waiting.id))
        canceled = await wait_for(client, waiting.id, timeout=30)
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        for _ in range(100):  # the closing segment writes the report
            task = await wait_for(client, waiting.id, timeout=5)
            if any(a.artifact_id == "report" for a in task.artifacts):
                break
            await asyncio.sleep(0.1)
        assert report_of(task)["remaining"] == ["gate"]
    assert rows(
        database_url, "SELECT decision, decided_how FROM pauses WHERE task_id = %s", waiting.id
    ) == [("ended", "ended")]
    assert git_clean(home / "workspaces" / waiting.id)


async def test_waiting_time_is_not_the_runs_wall_time(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "pause-8")
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(
            client, plan_with([item("gate", "true", "true", irreversible=True)])
        )
        await asyncio.sleep(1.5)
        await send(client, approval(waiting.id, None, "approve"))
        done = await wait_for(client, waiting.id, timeout=30)
    wall = dict(done.metadata["budget"]["wallS"])
    assert wall["waited"] >= 1.5
    assert wall["used"] <= wall["age"] - 1.5 + 0.2


async def test_a_note_to_a_working_task_reaches_the_model(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, home: Path
) -> None:
    fake.add(
        tool_reply("bash", {"command": "touch started; sleep 2; echo one > one.txt"}),
        text_reply("wrote one.txt"),
        tool_reply("bash", {"command": "echo two > two.txt"}),
        text_reply("wrote two.txt"),
    )
    server = start_agent("serve", "pause-9", **model_env(fake))
    items = [
        {"id": "one", "title": "Write one.txt", "verify": "test -f one.txt"},
        {"id": "two", "title": "Write two.txt", "verify": "test -f two.txt"},
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(items))
        started = home / "workspaces" / task.id / "started"
        for _ in range(300):  # the model's command is running: its turn is in progress
            if started.exists():
                break
            await asyncio.sleep(0.02)
        note = text_to(task.id, "Use lowercase file names only.")
        acknowledged = await send(client, note)
        assert acknowledged.history[-1].message_id == note.message_id
        again = await send(client, note)  # a retry of the note is kept once
        assert again.id == task.id
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert rows(database_url, "SELECT text FROM notes WHERE task_id = %s", task.id) == [
        ("Use lowercase file names only.",)
    ]
    progress = (home / "workspaces" / task.id / "progress.md").read_text()
    assert "note from the caller: Use lowercase file names only." in progress
    # The turn in progress reads it with the result of the command it was running...
    assert "Use lowercase file names only." in str(fake.requests[1]["messages"][-1])
    # ...and the next item's context has it too.
    later = [r for r in fake.requests if "# Your item: two" in str(r["messages"])]
    assert later and "Use lowercase file names only." in str(later[0]["messages"])


def goal_message(text: str, policy: dict[str, Any]) -> Message:
    return data_message({"policy": policy}, text=text)


async def test_a_drafted_plan_waits_for_review_before_any_work(
    start_agent: StartAgent, fake: FakeAnthropic, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    fake.add(
        tool_reply(
            "submit_plan",
            {
                "goal": "two files",
                "items": [
                    # (checks that fail before the work: a weak one goes back to the model)
                    {
                        "id": "one",
                        "title": "one",
                        "run": keyed(ledger),
                        "verify": f"test -f {ledger}",
                    },
                    {
                        "id": "two",
                        "title": "two",
                        "run": keyed(ledger),
                        "verify": f"test -f {ledger}",
                    },
                ],
            },
        )
    )
    server = start_agent("serve", "pause-10", **model_env(fake))
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, goal_message("Write two files", {"reviewPlan": True}))
        asked = request_of(waiting)
        assert asked["kind"] == "plan_review" and asked["id"] == "plan_review"
        assert [i["id"] for i in asked["details"]["items"]] == ["one", "two"]
        assert not ledger.exists()  # no work before the review
        await send(client, text_to(waiting.id, "approve"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED
    assert sum(ledger_runs(ledger).values()) == 2 and fake.request_count == 1


async def test_budget_pause_point_waits_and_an_approval_may_raise_the_limit(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    fake.add(
        *[tool_reply("bash", {"command": "true"}) for _ in range(5)],
        tool_reply("bash", {"command": "touch done.txt"}),
        text_reply("done.txt is there"),
    )
    server = start_agent("serve", "pause-11", **model_env(fake))
    message = data_message(
        {
            "plan": {
                "goal": "spend",
                "items": [{"id": "work", "title": "work", "verify": "test -f done.txt"}],
                "policy": {"budgetPause": True},
            },
            "budget": {"maxActions": {"*": 5}},
        }
    )
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, message)
        asked = request_of(waiting)
        assert asked["kind"] == "budget_threshold" and asked["id"] == "budget.actions.5"
        assert asked["details"]["used"] == 4 and asked["details"]["limit"] == 5
        calls_before = fake.request_count
        with pytest.raises(InvalidParamsError, match="above this server's cap"):
            await send(
                client,
                approval(waiting.id, None, "approve", budget={"maxActions": {"*": 10**9}}),
            )
        await send(client, approval(waiting.id, None, "approve", budget={"maxActions": {"*": 50}}))
        done = await wait_for(client, waiting.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert fake.request_count == calls_before + 3  # the paused call was made once, after
    assert done.metadata["budget"]["actions"]["limit"] == 50
    assert rows(database_url, "SELECT count(*) FROM model_calls WHERE task_id = %s", done.id) == [
        (7,)
    ]


async def test_a_refused_tool_call_is_an_error_the_model_reads(
    start_agent: StartAgent, fake: FakeAnthropic, home: Path
) -> None:
    fake.add(
        tool_reply("bash", {"command": "echo DANGER > danger.txt"}),
        tool_reply("bash", {"command": "touch ok.txt"}),
        text_reply("made ok.txt instead"),
    )
    server = start_agent(
        "serve", "pause-12", A2A_AGENT_IRREVERSIBLE=r"\bDANGER\b", **model_env(fake)
    )
    items = [{"id": "work", "title": "work", "verify": "test -f ok.txt"}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        assert request_of(waiting)["id"] == "command.work.1.tool.0.0"
        await send(client, text_to(waiting.id, "reject: not that one"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert not (workspace / "danger.txt").exists() and (workspace / "ok.txt").exists()
    told = str(fake.requests[1]["messages"][-1])
    assert "Not run: a person did not approve" in told and "not that one" in told


@pytest.mark.processes
@pytest.mark.slow
async def test_a_wait_survives_kill_9_and_the_run_resumes_on_the_reply(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    server = start_agent("serve", "pause-k")
    items = [
        item("a", keyed(ledger), "true"),
        item("gate", keyed(ledger), "true", irreversible=True),
        item("c", keyed(ledger), "true"),
    ]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
    server.kill()
    server = start_agent("serve", "pause-k")
    async with a2a_client(server.url) as client:
        still = await wait_for(client, waiting.id, WAITING, timeout=30)
        assert request_of(still)["id"] == "irreversible.gate"
        await send(client, approval(waiting.id, "irreversible.gate", "approve"))
        done = await wait_for(client, waiting.id, timeout=60)
    assert done.status.state == COMPLETED
    runs = ledger_runs(ledger)
    assert runs == Counter({f"{done.id}:{i}:1:run": 1 for i in ("a", "gate", "c")})
    effects = rows(
        database_url,
        "SELECT key, runs FROM effects WHERE task_id = %s AND step = 'run' ORDER BY key",
        done.id,
    )
    assert [r[1] for r in effects] == [1, 1, 1]


def continue_message(earlier: str, budget: dict[str, Any] | None = None) -> Message:
    payload: dict[str, Any] = {"continue": True}
    if budget is not None:
        payload["budget"] = budget
    message = data_message(payload)
    message.reference_task_ids.append(earlier)
    return message


async def test_a_budget_stopped_task_continues_as_a_new_task_from_its_checkpoint(
    start_agent: StartAgent, database_url: str, home: Path, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger"
    stamp = f'echo "$A2A_ITEM_ID" >> {ledger}'
    server = start_agent("serve", "pause-13")
    items = [
        item("a", f"{stamp}; echo a > a.txt", "test -f a.txt"),
        item("b", f"{stamp}; sleep 6; echo b > b.txt", "test -f b.txt"),
        item("c", f"{stamp}; echo c > c.txt", "test -f c.txt"),
    ]
    stopped_message = plan_with(items)
    value = Value()
    # Counted from the task's creation: room for `a` on a loaded machine, not for `b`
    # (which sleeps 6 s after `a` is done, so any limit up to 6 s stops it; 4 s left `a`
    # too little under the whole suite with six test processes).
    value.struct_value.update({"budget": {"maxWallS": 6}})
    stopped_message.parts.append(Part(data=value, media_type="application/json"))
    async with a2a_client(server.url) as client:
        stopped = await wait_for(client, (await send(client, stopped_message)).id, timeout=30)
        assert stopped.status.state == FAILED and "budget_exhausted" in str(stopped.metadata)
        assert plan_of(stopped)["items"][0]["status"] == "done"
        a_commit = plan_of(stopped)["items"][0]["commit"]

        with pytest.raises(InvalidParamsError, match="does not exist"):
            await send(client, continue_message("no-such-task"))
        running = await send(client, plan_with([item("slow", "sleep 5", "true")]))
        with pytest.raises(InvalidParamsError, match="only a task that ended"):
            await send(client, continue_message(running.id))
        await client.cancel_task(CancelTaskRequest(id=running.id))

        first = continue_message(stopped.id)
        continued = await send(client, first)
        assert (await send(client, first)).id == continued.id  # a retry makes no second task
        done = await wait_for(client, continued.id, timeout=60)
        earlier = await wait_for(client, stopped.id, timeout=5)
    assert done.status.state == COMPLETED, done.status.message
    # `a` was not run again; `b` ran again if the budget stopped the first task inside it
    # (a slow machine may stop it before `b` began).
    runs = ledger.read_text().split()
    assert (
        runs.count("a") == 1
        and runs[-2:] == ["b", "c"]
        and runs
        in (
            ["a", "b", "b", "c"],
            ["a", "b", "c"],
        )
    )
    plan = plan_of(done)["items"]
    assert [i["status"] for i in plan] == ["done", "done", "done"]
    assert plan[0]["commit"] == a_commit
    assert done.metadata["continues"]["taskId"] == stopped.id
    assert done.metadata["continues"]["checkpoint"] == a_commit
    assert list(earlier.metadata["continuedBy"]) == [continued.id]
    workspace = home / "workspaces" / done.id
    log = subprocess.run(
        ["git", "log", "--format=%H"], cwd=workspace, capture_output=True, text=True, check=True
    ).stdout.split()
    assert a_commit in log and git_clean(workspace)
    assert (
        rows(database_url, "SELECT budget ->> 'max_wall_s' FROM tasks WHERE id = %s", done.id)[0][0]
        != "4"
    )  # a fresh budget


async def test_a_fact_changed_behind_the_runs_back_is_caught_before_an_irreversible_item(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    version = tmp_path / "version"
    version.write_text("v1\n")
    server = start_agent("serve", "pause-14")
    items = [
        item(
            "probe",
            "true",
            "true",
            facts=[{"key": "version", "check": f"cat {version}", "maxAgeS": 1}],
        ),
        item("wait", "sleep 3", "true"),
        item("deploy", "true", "true", irreversible=True),
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(items))
        wait_for_fact = 0
        while not rows(database_url, "SELECT 1 FROM facts WHERE task_id = %s", task.id):
            wait_for_fact += 1
            assert wait_for_fact < 300, "the fact was never established"
            await asyncio.sleep(0.05)
        version.write_text("v2\n")  # behind the run's back
        waiting = await wait_for(client, task.id, WAITING, timeout=30)
        asked = request_of(waiting)
        assert asked["kind"] == "stale_fact"
        (changed,) = asked["details"]["facts"]
        assert (changed["key"], changed["old"], changed["new"]) == ("version", "v1", "v2")
        assert waiting.metadata["facts"]["version"]["value"] == "v1"
        await send(client, approval(task.id, asked["id"], "approve", note="v2 is fine"))
        second = await wait_for(client, task.id, WAITING, timeout=30)
        assert request_of(second)["id"] == "irreversible.deploy"
        await send(client, approval(task.id, "irreversible.deploy", "approve"))
        done = await wait_for(client, task.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    assert done.metadata["facts"]["version"]["value"] == "v2"
    assert rows(database_url, "SELECT value, source FROM facts WHERE task_id = %s", task.id) == [
        ("v2", "item probe")
    ]


async def test_the_model_records_a_fact_with_a_tool(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    fake.add(
        tool_reply("record_fact", {"key": "api", "value": "v2", "check": "echo v2"}),
        tool_reply("bash", {"command": "touch done.txt"}),
        text_reply("done"),
    )
    server = start_agent("serve", "pause-15", **model_env(fake))
    items = [{"id": "work", "title": "work", "verify": "test -f done.txt"}]
    async with a2a_client(server.url) as client:
        done = await wait_for(client, (await send(client, plan_with(items))).id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    assert done.metadata["facts"]["api"]["value"] == "v2"
    assert rows(
        database_url, "SELECT value, source, check_command FROM facts WHERE task_id = %s", done.id
    ) == [("v2", "model (item work)", "echo v2")]


async def test_the_model_asks_a_person_through_a_tool(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    fake.add(
        tool_reply("ask_person", {"question": "Which port should it listen on?"}),
        tool_reply("bash", {"command": "echo 8080 > port.txt"}),
        text_reply("wrote port.txt"),
    )
    server = start_agent("serve", "pause-16", **model_env(fake))
    items = [{"id": "work", "title": "Pick the port", "verify": "grep -q 8080 port.txt"}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        asked = request_of(waiting)
        assert asked["kind"] == "question" and asked["id"] == "ask.work.1.tool.0.0"
        assert "Which port" in asked["summary"]
        assert fake.request_count == 1
        await send(client, text_to(waiting.id, "8080, as in production"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    assert fake.request_count == 3  # the asking call was not made again
    assert "The person answered: 8080, as in production" in str(fake.requests[1]["messages"][-1])


async def test_a_plan_change_the_model_proposes_waits_for_approval(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    extra = {
        "id": "extra",
        "title": "Extra",
        "run": "touch extra.txt",
        "verify": "test -f extra.txt",
    }
    fake.add(
        tool_reply("propose_plan_change", {"remove": ["first"], "reason": "not needed"}),
        tool_reply(
            "propose_plan_change",
            {
                "add": [extra],
                "remove": ["later"],
                "change": [{"id": "tune", "verify": "true", "title": "Tune (checked)"}],
                "reason": "later is covered by extra; tune's check was wrong",
            },
        ),
        tool_reply("bash", {"command": "touch work.txt"}),
        text_reply("work.txt is there"),
    )
    server = start_agent("serve", "pause-17", **model_env(fake))
    items = [
        item("first", "true", "true"),
        {"id": "work", "title": "work", "verify": "test -f work.txt"},
        item("later", "true", "true"),
        item("tune", "true", "false", max_attempts=1),
    ]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items))
        asked = request_of(waiting)
        assert asked["kind"] == "plan_change" and asked["options"] == ["approve", "reject"]
        assert asked["details"]["change"][0]["verifyCommand"] == "true"
        assert asked["details"]["remove"] == ["later"]
        assert [i["id"] for i in plan_of(waiting)["items"]] == ["first", "work", "later", "tune"]
        assert plan_of(waiting)["items"][3]["verify"] == "false"  # nothing changed yet
        # Removing a done item was refused to the model itself, without asking anyone.
        assert "done items are never removed" in str(fake.requests[1]["messages"][-1])
        await send(client, approval(waiting.id, asked["id"], "approve", note="fine"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    plan = {i["id"]: i["status"] for i in plan_of(done)["items"]}
    assert plan == {
        "first": "done",
        "work": "done",
        "later": "skipped",
        "tune": "done",
        "extra": "done",
    }
    tune = next(i for i in plan_of(done)["items"] if i["id"] == "tune")
    assert (tune["title"], tune["verify"]) == ("Tune (checked)", "true")
    assert "Approved: the plan changed as proposed." in str(fake.requests[2]["messages"][-1])
    assert rows(
        database_url, "SELECT kind, decision, note FROM pauses WHERE task_id = %s", done.id
    ) == [("plan_change", "approve", "fine")]


async def test_by_default_a_failed_item_asks_and_the_card_says_so(
    start_agent: StartAgent, database_url: str
) -> None:
    # The shipped defaults (the test processes otherwise run with the old ones).
    server = start_agent(
        "serve", "pause-18", A2A_AGENT_ON_ITEM_FAILURE="", A2A_AGENT_BUDGET_PAUSE=""
    )
    card = httpx.get(f"{server.url}/.well-known/agent-card.json").json()
    (extension,) = [e for e in card["capabilities"]["extensions"] if "verified-plan" in e["uri"]]
    defaults = extension["params"]["policyDefaults"]
    assert defaults["onItemFailure"] == "ask" and defaults["budgetPause"] is True
    assert defaults["onRegression"] == "ask"
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(
            client, plan_with([item("x", "true", "false", max_attempts=1)])
        )
        assert request_of(waiting)["kind"] == "repeated_failure"
        await send(client, text_to(waiting.id, "stop: enough"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == FAILED
    assert rows(database_url, "SELECT policy FROM tasks WHERE id = %s", done.id) == [
        ({"on_item_failure": "ask", "budget_pause": True, "on_regression": "ask"},)
    ]


async def test_an_asking_tool_call_is_held_to_the_action_budget(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    fake.add(
        tool_reply("bash", {"command": "true"}),
        tool_reply("ask_person", {"question": "may I go on?"}),
    )
    server = start_agent("serve", "pause-19", **model_env(fake))
    message = data_message(
        {
            "plan": {"goal": "g", "items": [{"id": "w", "title": "w", "verify": "true"}]},
            "budget": {"maxActions": {"*": 1}},
        }
    )
    async with a2a_client(server.url) as client:
        done = await wait_for(client, (await send(client, message)).id, timeout=30)
    assert done.status.state == FAILED
    assert done.metadata["failure"]["dimension"] == "actions"
    assert rows(database_url, "SELECT count(*) FROM pauses WHERE task_id = %s", done.id) == [(0,)]


async def test_a_retry_note_reaches_the_model(start_agent: StartAgent, fake: FakeAnthropic) -> None:
    fake.add(
        text_reply("I think it is done."),
        tool_reply("bash", {"command": "touch ok.txt"}),
        text_reply("ok.txt is there now"),
    )
    server = start_agent("serve", "pause-20", **model_env(fake))
    items = [{"id": "w", "title": "make ok.txt", "verify": "test -f ok.txt", "maxAttempts": 1}]
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(items, {"onItemFailure": "ask"}))
        assert request_of(waiting)["kind"] == "repeated_failure"
        await send(client, text_to(waiting.id, "retry: create ok.txt with touch"))
        done = await wait_for(client, waiting.id, timeout=30)
    assert done.status.state == COMPLETED, done.status.message
    assert "create ok.txt with touch" in str(fake.requests[1]["messages"])
