"""Delegation (issue 17): a chunk of work handed to a child run of this service, or to a peer
A2A agent (a second instance of this service on loopback), durably: one child or remote task
however often a crash makes us send it, the child's spending on both ledgers, the parent's own
verify command deciding, a delegate's question answered on the parent, and a cancel that
reaches the delegates."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, Part, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.peers import StartPeer
from tests.support.processes import AgentProcess, StartAgent
from tests.test_auth import make_key
from tests.test_cli import cli
from tests.test_pauses import data_message, request_of, text_to
from tests.test_restart import assert_transitions_sound

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED
CANCELED = TaskState.TASK_STATE_CANCELED
WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
JSON = dict[str, Any]


def peer_env(peer: AgentProcess, key: str) -> dict[str, str]:
    return {
        "A2A_AGENT_PEERS": json.dumps([{"name": "helper", "url": peer.url, "key": key}]),
        "A2A_AGENT_PEER_POLL_S": "1",
    }


def peer_key(peer: AgentProcess) -> str:
    return make_key(peer, "delegator", "read", "submit", "run", "approve")


def peer_tasks(peer: AgentProcess) -> list[tuple[Any, ...]]:
    return rows(
        peer.env["DATABASE_URL"],
        "SELECT id, state, history -> 0 ->> 'messageId' FROM tasks ORDER BY created_at",
    )


def budget_of(task: Task) -> JSON:
    return dict(MessageToDict(task.metadata)["budget"])


def delegations_of(task: Task) -> list[JSON]:
    return list(MessageToDict(task.metadata).get("delegations") or [])


class Routed:
    """Scripted model replies for two conversations at once: the child run's (its first
    message names `marker`) and the parent's, each in its own order."""

    def __init__(self, marker: str, parent: list[JSON], child: list[JSON]) -> None:
        self.marker = marker
        self.parent, self.child = deque(parent), deque(child)

    def __call__(self, body: JSON) -> JSON:
        first = json.dumps(body["messages"][0])
        return (self.child if self.marker in first else self.parent).popleft()

    @property
    def entries(self) -> list[Callable[[JSON], JSON]]:
        return [self] * (len(self.parent) + len(self.child))


def conversations(fake: FakeAnthropic, marker: str) -> tuple[list[str], list[str]]:
    """The parent's and the child's model requests, each as text."""
    parent: list[str] = []
    child: list[str] = []
    for body in fake.requests:
        (child if marker in json.dumps(body["messages"][0]) else parent).append(json.dumps(body))
    return parent, child


SURVEY = {"id": "survey", "title": "Summarise the repository", "verify": "test -s summary.txt"}
CHILD_ITEM = {"id": "count", "title": "CHILD-ITEM count files", "verify": "test -s count.txt"}
CHILD_PLAN: JSON = {"goal": "CHILD-GOAL count the files", "items": [CHILD_ITEM]}
ASK_CHILD = {"goal": "count the files", "plan": CHILD_PLAN}


def survey_routes() -> Routed:
    """The parent delegates the count to a child and writes its summary; the child counts."""
    return Routed(
        "CHILD-ITEM",
        parent=[
            tool_reply("delegate", ASK_CHILD),
            tool_reply("bash", {"command": "echo surveyed > summary.txt"}),
            text_reply("summary written"),
        ],
        child=[tool_reply("bash", {"command": "echo 3 > count.txt"}), text_reply("counted")],
    )


def sliced_parent(max_tokens: int) -> list[JSON]:
    """A parent that gives its child a token slice, then does the item itself."""
    return [
        tool_reply(
            "delegate",
            {"goal": "count the files", "plan": CHILD_PLAN, "budget": {"maxTokens": max_tokens}},
        ),
        tool_reply("bash", {"command": "echo counted myself > summary.txt"}),
        text_reply("did it here"),
    ]


# The child works on a copy of the parent's workspace: the parent's file is there.
SHARED_CHILD = {
    "goal": "count the files",
    "plan": {
        **CHILD_PLAN,
        "items": [{**CHILD_ITEM, "verify": "test -s count.txt && test -f data.txt"}],
    },
}


async def test_a_child_run_reports_to_its_parent_and_spends_on_both_ledgers(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, home: Path
) -> None:
    routed = Routed(
        "CHILD-ITEM",
        parent=[
            tool_reply(
                "delegate",
                {**SHARED_CHILD, "budget": {"maxUsd": 50}, "share_workspace": True},
            ),
            tool_reply("bash", {"command": "echo surveyed > summary.txt"}),
            text_reply("summary written"),
        ],
        child=[
            tool_reply("bash", {"command": "echo SECRET-CHILD-OUTPUT; echo 3 > count.txt"}),
            text_reply("counted"),
        ],
    )
    fake.add(*routed.entries)
    server = start_agent("serve", "deleg-1", **model_env(fake))
    message = data_message({"plan": {"goal": "survey", "items": [SURVEY]}, "budget": {"maxUsd": 2}})
    message.parts.append(Part(raw=b"1,2,3\n", filename="data.txt", media_type="text/csv"))
    async with a2a_client(server.url) as client:
        task = await send(client, message)
        done = await wait_for(client, task.id, timeout=90)
        assert done.status.state == COMPLETED, done.status.message
        (found,) = delegations_of(done)
        child = await client.get_task(GetTaskRequest(id=found["child"]))
    assert child.status.state == COMPLETED and found["state"] == "ended"
    assert list(child.history[0].reference_task_ids) == [done.id]
    assert MessageToDict(child.metadata)["parent"] == done.id
    assert [i["status"] for i in plan_of(child)["items"]] == ["done"]
    shared = MessageToDict(child.metadata)["workspace"]
    assert shared["source"] == "from_task" and shared["taskId"] == done.id

    # The parent's context holds the child's report, never its transcript.
    parent_calls, child_calls = conversations(fake, "CHILD-ITEM")
    assert len(child_calls) == 2 and any("SECRET-CHILD-OUTPUT" in c for c in child_calls)
    assert not any("SECRET-CHILD-OUTPUT" in c for c in parent_calls)
    told = json.loads(parent_calls[1])["messages"][-1]["content"][0]
    assert told["type"] == "tool_result" and not told.get("is_error")
    assert f"child task {child.id}" in told["content"] and '"completed"' in told["content"]

    # The child's spending is on its own ledger and, once more, on its parent's.
    def ledger(task_id: str, kinds: str) -> tuple[Decimal, int]:
        ((usd, tokens),) = rows(
            database_url,
            "SELECT coalesce(sum(usd), 0), coalesce(sum(tokens), 0) FROM budget_charges"
            f" WHERE task_id = %s AND kind {kinds}",
            task_id,
        )
        return usd, int(tokens)

    child_usd, child_tokens = ledger(child.id, "<> 'reservation'")
    assert child_usd > 0 and child_tokens > 0
    assert ledger(done.id, "= 'child'") == (child_usd, child_tokens)
    own_usd, _ = ledger(done.id, "NOT IN ('reservation', 'child')")
    parent_usd = budget_of(done)["usd"]
    assert parent_usd["used"] == pytest.approx(float(own_usd + child_usd), abs=1e-6)
    # The slice asked for (50 USD) was capped by what the parent had left of its 2 USD.
    assert 0 < budget_of(child)["usd"]["limit"] <= 2
    assert (home / "workspaces" / done.id / "summary.txt").exists()

    # People see the tree: the CLI from either end, the dashboard on each run's page.
    shown = cli(server, "tasks", "tree", child.id, "--json")
    assert shown.returncode == 0, shown.stderr
    tree = json.loads(shown.stdout)
    assert tree["id"] == done.id and not tree["current"]
    assert [(c["id"], c["state"], c["current"]) for c in tree["children"]] == [
        (child.id, "completed", True)
    ]
    drawn = cli(server, "tasks", "tree", done.id)
    assert drawn.returncode == 0 and child.id in drawn.stdout and done.id in drawn.stdout
    page = httpx.get(f"{server.url}/ui/tasks/{child.id}/body", timeout=10).text
    assert f'href="/ui/tasks/{done.id}"' in page and f'data-run="{child.id}"' in page


async def test_a_child_over_its_slice_stops_cleanly_and_the_parent_goes_on(
    start_agent: StartAgent, fake: FakeAnthropic, home: Path
) -> None:
    routed = Routed(
        "CHILD-ITEM",
        parent=sliced_parent(40),
        child=[tool_reply("bash", {"command": "echo 3 > count.txt"}), text_reply("counted")],
    )
    fake.add(*routed.entries)
    server = start_agent("serve", "deleg-2", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "survey", "items": [SURVEY]}}))
        done = await wait_for(client, task.id, timeout=90)
        assert done.status.state == COMPLETED, done.status.message
        (found,) = delegations_of(done)
        child = await client.get_task(GetTaskRequest(id=found["child"]))
    assert child.status.state == FAILED
    assert "budget" in child.status.message.parts[0].text
    assert report_of(child)["summary"]  # its record is closed: a report, the files committed
    assert budget_of(child)["tokens"]["limit"] == 40
    parent_calls, _ = conversations(fake, "CHILD-ITEM")
    told = json.loads(parent_calls[1])["messages"][-1]["content"][0]
    assert told["is_error"] is True and '"failed"' in told["content"]


def delegated_plan(peer_plan: JSON, verify: str, item_id: str = "feature") -> JSON:
    return {
        "id": item_id,
        "title": f"Have the helper do {item_id}",
        "delegateTo": {"peer": "helper", "plan": peer_plan},
        "verify": verify,
    }


WRITE_HELLO = {
    "goal": "write the greeting",
    "items": [item("write", "echo hello > hello.txt", "test -f hello.txt")],
}


async def test_an_item_delegated_to_a_peer_comes_back_and_our_verify_decides(
    start_agent: StartAgent, peer: AgentProcess, home: Path
) -> None:
    key = peer_key(peer)
    server = start_agent("serve", "deleg-3", **peer_env(peer, key))
    items = [
        delegated_plan(WRITE_HELLO, "grep -qx hello hello.txt", "feature"),
        # The peer does what it was asked and completes; our check wants more: it decides.
        delegated_plan(WRITE_HELLO, "grep -q goodbye hello.txt", "farewell"),
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "delegate", "items": items}}))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == FAILED, done.status.message
    feature, farewell = plan_of(done)["items"]
    assert feature["status"] == "done" and farewell["status"] == "failed"
    assert feature["evidence"]["exitCode"] == 0 and farewell["evidence"]["exitCode"] == 1
    workspace = home / "workspaces" / done.id
    assert (workspace / "hello.txt").read_text() == "hello\n"  # the peer's diff, applied
    assert "hello.txt" in (workspace / "delegated" / "feature.md").read_text()
    sent = delegations_of(done)
    # One remote task per attempt: `farewell` was worked again (its check failed) and failed.
    attempts = {"feature": int(feature["attempts"]), "farewell": int(farewell["attempts"])}
    assert sorted(d["item"] for d in sent) == sorted(
        k for k, n in attempts.items() for _ in range(n)
    )
    assert attempts["farewell"] > 1 and {d["remoteState"] for d in sent} == {"completed"}
    at_peer = peer_tasks(peer)
    assert sorted(r[0] for r in at_peer) == sorted(d["remoteTask"] for d in sent)
    assert {r[1] for r in at_peer} == {"completed"}
    # The CLI's tree shows the peer's tasks under ours: whose, which, how they ended.
    shown = cli(server, "tasks", "tree", done.id, "--json")
    assert shown.returncode == 0, shown.stderr
    tree = json.loads(shown.stdout)
    assert (tree["id"], tree["state"], tree["current"]) == (done.id, "failed", True)
    assert sorted((c["peer"], c["id"], c["state"], c["item"]) for c in tree["children"]) == sorted(
        ("helper", d["remoteTask"], "completed", d["item"]) for d in sent
    )
    assert all(c["goal"].startswith("Have the helper do") for c in tree["children"])
    drawn = cli(server, "tasks", "tree", done.id)
    assert drawn.returncode == 0 and drawn.stdout.count("peer helper:") == len(sent)
    # The peer pushed each task's events to our webhook, which took them (token checked).
    # Its deliverer works on its own time: the last pushes may still be on their way.
    deadline = time.monotonic() + 20
    while True:
        pushed = rows(
            peer.env["DATABASE_URL"],
            "SELECT url, delivered, state, last_error FROM push_configs ORDER BY created_at",
        )
        if all(p[1] > 0 for p in pushed) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert len(pushed) == len(at_peer)
    for url, delivered, state, error in pushed:
        assert f"{server.url}/peers/notify/{done.id}/" in url
        assert delivered > 0 and state == "active" and error is None
    # Anyone else calling the webhook is refused: it needs the token we gave the peer.
    forged = httpx.post(pushed[0][0], json={"task": {}}, timeout=10)
    assert forged.status_code == 401 and "not a notification" in forged.text


async def test_a_peer_that_asks_gets_its_answer_through_our_task(
    start_agent: StartAgent, peer: AgentProcess, home: Path
) -> None:
    key = peer_key(peer)
    server = start_agent("serve", "deleg-4", **peer_env(peer, key))
    asking = {
        "goal": "name the service",
        "items": [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}],
    }
    items = [delegated_plan(asking, "grep -q Heron delegated/name.md", "name")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "ask", "items": items}}))
        waiting = await wait_for(client, task.id, WAITING, timeout=60)
        asked = request_of(waiting)
        assert (
            asked["kind"] == "delegated_request"
            and "What should it be called?" in (asked["summary"])
        )
        await send(client, text_to(waiting.id, "Call it Heron."))
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == COMPLETED, done.status.message
    ((remote_id, state, _),) = peer_tasks(peer)
    assert state == "completed"
    async with a2a_client(peer.url, key=key) as client:
        at_peer = await client.get_task(GetTaskRequest(id=remote_id))
    answered = plan_of(at_peer)["items"][0]["history"]
    assert any((h.get("work") or {}).get("answer") == "Call it Heron." for h in answered)
    assert "Heron" in (home / "workspaces" / done.id / "delegated" / "name.md").read_text()


def sends(database_url: str, task_id: str) -> list[tuple[Any, ...]]:
    """The delegation effects of a task: how often each was performed."""
    return rows(
        database_url,
        "SELECT runs, status FROM effects WHERE key LIKE %s || ':%%:send'",
        task_id,
    )


@pytest.mark.processes
@pytest.mark.slow
async def test_a_crash_between_sending_and_recording_makes_one_remote_task(
    start_agent: StartAgent, peer: AgentProcess, database_url: str, home: Path, tmp_path: Path
) -> None:
    """The worker is killed (SIGKILL) right after the peer took the task and before the
    delegation was recorded; its nanny starts another, which sends again: the same task."""
    key = peer_key(peer)
    fault = tmp_path / "fault"
    fault.write_text("delegation-sent")
    server = start_agent("serve", "deleg-5", **peer_env(peer, key), A2A_AGENT_FAULT_FILE=str(fault))
    items = [delegated_plan(WRITE_HELLO, "grep -qx hello hello.txt")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "crash", "items": items}}))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    assert sends(database_url, task.id) == [(2, "completed")]  # sent twice...
    ((remote_id, state, message_id),) = peer_tasks(peer)  # ...one task at the peer
    assert state == "completed" and message_id.endswith(":send")
    (found,) = delegations_of(done)
    assert found["remoteTask"] == remote_id
    assert (home / "workspaces" / done.id / "hello.txt").read_text() == "hello\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    "case",
    # Killed after the child was made and before its step was recorded (the step runs again
    # and makes no second child), or after the step and before the child was enqueued.
    [("delegation-sent", 2), ("before-start", 1)],
)
async def test_a_crash_after_making_a_child_makes_one_child(
    start_agent: StartAgent,
    fake: FakeAnthropic,
    database_url: str,
    tmp_path: Path,
    case: tuple[str, int],
) -> None:
    point, sent = case
    routed = survey_routes()
    fake.add(*routed.entries)
    fault = tmp_path / "fault"
    fault.write_text(point)
    server = start_agent("serve", "deleg-6", **model_env(fake), A2A_AGENT_FAULT_FILE=str(fault))
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "survey", "items": [SURVEY]}}))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    assert sends(database_url, task.id) == [(sent, "completed")]
    ((child_id, state),) = rows(
        database_url, "SELECT id, state FROM tasks WHERE parent_id = %s", task.id
    )
    assert state == "completed" and delegations_of(done)[0]["child"] == child_id
    assert_transitions_sound(database_url, child_id)


async def test_canceling_the_parent_cancels_its_delegates_local_and_remote(
    start_agent: StartAgent, fake: FakeAnthropic, peer: AgentProcess, database_url: str
) -> None:
    """Two runs whose model delegates with the `delegate` tool: one to a child run, one to
    the peer; both delegates work for a long time; canceling each parent reaches its delegate."""
    slow = {"goal": "CHILD-GOAL wait", "items": [item("wait", "sleep 60", "true")]}
    routed = Routed(
        "REMOTE-ITEM",
        parent=[tool_reply("delegate", {"goal": "wait here", "plan": slow})],
        child=[tool_reply("delegate", {"goal": "wait there", "plan": slow, "peer": "helper"})],
    )
    fake.add(*routed.entries)
    key = peer_key(peer)
    server = start_agent("serve", "deleg-7", **model_env(fake), **peer_env(peer, key))

    def plan(title: str) -> Any:
        only = {"id": "it", "title": title, "verify": "true", "precheck": False}
        return data_message({"plan": {"goal": "cancel", "items": [only]}})

    async with a2a_client(server.url) as client:
        local = await send(client, plan("Delegate locally"))
        far = await send(client, plan("REMOTE-ITEM delegate to the helper"))
        child_id = await until(lambda: _child_of(database_url, local.id))
        remote_id = await until(lambda: _remote_of(database_url, far.id))
        await client.cancel_task(CancelTaskRequest(id=local.id))
        await client.cancel_task(CancelTaskRequest(id=far.id))
        local_done = await wait_for(client, local.id, timeout=30)
        far_done = await wait_for(client, far.id, timeout=30)
        child = await wait_for(client, child_id, timeout=60)
    assert local_done.status.state == CANCELED and far_done.status.state == CANCELED
    assert child.status.state == CANCELED
    assert local.id in child.status.message.parts[0].text  # "the task that delegated it"
    async with a2a_client(peer.url, key=key) as client:
        at_peer = await wait_for(client, remote_id, timeout=60)
    assert at_peer.status.state == CANCELED
    ((ended,),) = rows(database_url, "SELECT state FROM delegations WHERE task_id = %s", far.id)
    assert ended == "ended"


def _child_of(database_url: str, task_id: str) -> str | None:
    found = rows(database_url, "SELECT id FROM tasks WHERE parent_id = %s", task_id)
    return str(found[0][0]) if found else None


def _remote_of(database_url: str, task_id: str) -> str | None:
    found = rows(
        database_url,
        "SELECT remote_id FROM delegations WHERE task_id = %s AND remote_id IS NOT NULL",
        task_id,
    )
    return str(found[0][0]) if found else None


async def until(probe: Callable[[], str | None], timeout: float = 60) -> str:
    import asyncio  # noqa: PLC0415

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found is not None:
            return found
        await asyncio.sleep(0.1)
    raise TimeoutError("never happened")


async def test_a_peer_that_refuses_our_webhook_is_followed_by_polling(
    start_agent: StartAgent, start_peer: StartPeer, home: Path
) -> None:
    peer = start_peer()  # its guard refuses a webhook on loopback, as by default
    key = peer_key(peer)
    server = start_agent("serve", "deleg-8", **peer_env(peer, key))
    items = [delegated_plan(WRITE_HELLO, "grep -qx hello hello.txt")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "poll", "items": items}}))
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == COMPLETED, done.status.message
    ((remote_id, state, _),) = peer_tasks(peer)  # one task: the refused send made none
    assert state == "completed" and delegations_of(done)[0]["remoteTask"] == remote_id
    assert rows(peer.env["DATABASE_URL"], "SELECT count(*) FROM push_configs") == [(0,)]
    assert "refused our webhook" in server.log()
    assert (home / "workspaces" / done.id / "hello.txt").read_text() == "hello\n"


async def test_a_child_runs_question_is_answered_on_its_parent(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    asking = {
        "goal": "CHILD-GOAL name it",
        "items": [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}],
    }
    fake.add(
        tool_reply("delegate", {"goal": "name the service", "plan": asking}),
        tool_reply("bash", {"command": "cat > summary.txt <<< named"}),
        text_reply("named"),
    )
    server = start_agent("serve", "deleg-9", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "survey", "items": [SURVEY]}}))
        waiting = await wait_for(client, task.id, WAITING, timeout=60)
        asked = request_of(waiting)
        assert asked["kind"] == "delegated_request"
        assert "What should it be called?" in asked["summary"]
        await send(client, text_to(task.id, "Call it Heron."))
        done = await wait_for(client, task.id, timeout=60)
        assert done.status.state == COMPLETED, done.status.message
        (found,) = delegations_of(done)
        child = await client.get_task(GetTaskRequest(id=found["child"]))
    assert child.status.state == COMPLETED
    answered = plan_of(child)["items"][0]["history"]
    assert any((h.get("work") or {}).get("answer") == "Call it Heron." for h in answered)
    # Decided once on each: the parent's request by the caller, the child's with it.
    decided = rows(
        database_url,
        "SELECT task_id, kind, decision, note FROM pauses WHERE decision IS NOT NULL",
    )
    assert sorted(decided) == sorted([
        (child.id, "question", "answer", "Call it Heron."),
        (done.id, "delegated_request", "answer", "Call it Heron."),
    ])  # fmt: skip


def test_peers_setting_and_delegate_to_are_checked() -> None:
    from a2a_agent.errors import ConfigError, PlanError  # noqa: PLC0415
    from a2a_agent.peers import parse_peers  # noqa: PLC0415
    from a2a_agent.plans import PlanLimits  # noqa: PLC0415
    from a2a_agent.plans import parse_plan as parse_snake  # noqa: PLC0415
    from a2a_agent.wire import from_wire  # noqa: PLC0415

    def parse_plan(plan: Any, limits: PlanLimits) -> Any:  # as the edge reads a caller's plan
        return parse_snake(from_wire(plan, "plan"), limits)

    with pytest.raises(ConfigError, match="not JSON"):
        parse_peers("[{")
    with pytest.raises(ConfigError, match='needs a "name" and a "url"'):
        parse_peers('[{"name": "x"}]')
    assert parse_peers(os.environ.get("NO_SUCH_VARIABLE")) == {}
    limits = PlanLimits(10, 3, 60, 600, peers=frozenset({"helper"}))
    plan: dict[str, Any] = {
        "goal": "g",
        "items": [{"id": "a", "delegateTo": "helper", "verify": "true"}],
    }
    assert parse_plan(plan, limits).items[0].delegate_to == {"peer": "helper"}
    assert parse_plan(plan, limits).items_needing_model == []
    plan["items"][0]["delegateTo"] = "stranger"
    with pytest.raises(PlanError, match=r"no known peer \('stranger'\); peers: helper"):
        parse_plan(plan, limits)
    plan["items"][0] = {"id": "a", "delegateTo": "helper", "run": "true", "verify": "true"}
    with pytest.raises(PlanError, match="has no run command"):
        parse_plan(plan, limits)
