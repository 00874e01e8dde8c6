"""Delegation (issue 17): what a peer's task must be sent after it was made, a person's answer
and a cancel, reaches it even when the peer cannot be reached at that moment: kept, sent again
until the peer takes it (under the same messageId, so a crash never makes it apply twice), and
a peer that answers that it cannot take an answer has the person told and asked again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, GetTaskRequest, TaskState

from tests.support.a2a import a2a_client, item, send, wait_for
from tests.support.db import rows
from tests.support.processes import AgentProcess, StartAgent
from tests.test_auth import make_key
from tests.test_delegation import (
    CANCELED,
    COMPLETED,
    WAITING,
    _remote_of,
    delegated_plan,
    peer_env,
    peer_key,
    peer_tasks,
    until,
)
from tests.test_pauses import data_message, request_of, text_to

WORKING = TaskState.TASK_STATE_WORKING
ASKING = {
    "goal": "name the service",
    "items": [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}],
}
NAMED = "grep -q Heron delegated/name.md"


def answers(database_url: str, task_id: str) -> list[tuple[Any, ...]]:
    return rows(
        database_url,
        "SELECT pause_id, message_id, state, tries, last_error FROM delegation_answers"
        " WHERE task_id = %s ORDER BY created_at",
        task_id,
    )


def answered_at_peer(peer: AgentProcess, remote_id: str) -> list[tuple[Any, ...]]:
    """The peer's requests of its task that were decided: how, and by which message."""
    return rows(
        peer.env["DATABASE_URL"],
        "SELECT decision, note, message_id FROM pauses WHERE task_id = %s"
        " AND decision IS NOT NULL ORDER BY decided_at",
        remote_id,
    )


def undecided(database_url: str, task_id: str) -> str | None:
    found = rows(
        database_url, "SELECT id FROM pauses WHERE task_id = %s AND decision IS NULL", task_id
    )
    return str(found[0][0]) if found else None


async def until_true(probe: Any, timeout: float = 60) -> None:
    await until(lambda: "yes" if probe() else None, timeout)


@pytest.mark.slow
async def test_an_answer_for_a_peer_that_is_down_reaches_it_when_it_is_back(
    start_agent: StartAgent, peer: AgentProcess, database_url: str
) -> None:
    key = peer_key(peer)
    server = start_agent("serve", "retry-1", **peer_env(peer, key))
    items = [delegated_plan(ASKING, NAMED, "name")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "ask", "items": items}}))
        waiting = await wait_for(client, task.id, WAITING, timeout=60)
        assert request_of(waiting)["kind"] == "delegated_request"
        ((remote_id, _, _),) = peer_tasks(peer)
        peer.kill()
        await send(client, text_to(task.id, "Call it Heron."))
        # Kept, and tried again while the peer is down (the poll runs every second).
        await until_true(lambda: any(a[2] == "pending" and a[3] >= 2 for a in answers(
            database_url, task.id)))  # fmt: skip
        (kept,) = answers(database_url, task.id)
        assert kept[4] is not None and "cannot be reached" in kept[4]
        meanwhile = await client.get_task(GetTaskRequest(id=task.id))
        assert meanwhile.status.state == WORKING  # it waits for the peer, not for a person
        peer.start()
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == COMPLETED, done.status.message
    ((pause_id, message_id, state, tries, error),) = answers(database_url, task.id)
    assert state == "sent" and tries >= 3 and error is None
    assert pause_id.startswith("via.") and message_id.endswith(f"forward.{pause_id}")
    # The peer applied it once, from our message, and its task went on with it.
    assert answered_at_peer(peer, remote_id) == [("answer", "Call it Heron.", message_id)]
    assert peer_tasks(peer)[0][1] == "completed"


@pytest.mark.slow
async def test_a_crash_after_the_peer_took_an_answer_does_not_give_it_twice(
    start_agent: StartAgent, peer: AgentProcess, database_url: str, tmp_path: Path
) -> None:
    """The worker is killed (SIGKILL) right after the peer took the answer and before that was
    recorded: the answer is sent again under the same messageId, and the peer keeps it once."""
    key = peer_key(peer)
    fault = tmp_path / "fault"
    server = start_agent("serve", "retry-2", **peer_env(peer, key), A2A_AGENT_FAULT_FILE=str(fault))
    items = [delegated_plan(ASKING, NAMED, "name")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "ask", "items": items}}))
        await wait_for(client, task.id, WAITING, timeout=60)
        fault.write_text("answer-sent")
        await send(client, text_to(task.id, "Call it Heron."))
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists() and "killed by signal 9" in server.log()
    ((_, message_id, state, _, _),) = answers(database_url, task.id)
    assert state == "sent"
    ((remote_id, remote_state, _),) = peer_tasks(peer)
    assert remote_state == "completed"
    assert answered_at_peer(peer, remote_id) == [("answer", "Call it Heron.", message_id)]
    # The peer kept the message once (a repeat of a messageId is the same message).
    assert rows(
        peer.env["DATABASE_URL"], "SELECT count(*) FROM messages WHERE message_id = %s",
        message_id,
    ) == [(1,)]  # fmt: skip


async def test_an_answer_the_peer_refuses_is_shown_and_asked_again(
    start_agent: StartAgent, peer: AgentProcess, database_url: str
) -> None:
    """The key we present at the peer may start and cancel tasks but not answer their
    requests: the peer refuses the answer. The person reads why, and is asked again."""
    key = make_key(peer, "delegator", "read", "submit")
    server = start_agent("serve", "retry-3", **peer_env(peer, key))
    items = [delegated_plan(ASKING, NAMED, "name")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "ask", "items": items}}))
        first = request_of(await wait_for(client, task.id, WAITING, timeout=60))
        await send(client, text_to(task.id, "Call it Heron."))
        await until_true(lambda: [a[2] for a in answers(database_url, task.id)] == ["refused"])
        again = await until(lambda: undecided(database_url, task.id))
        asked = request_of(await wait_for(client, task.id, WAITING, timeout=30))
        assert asked["id"] == again == f"{first['id']}.2" and asked["kind"] == "delegated_request"
        assert "did not take the answer" in asked["summary"] and "approve" in asked["summary"]
        assert "What should it be called?" in asked["summary"]
        ((_, _, _, _, why),) = answers(database_url, task.id)
        assert "approve" in why
        told = rows(
            database_url,
            "SELECT reason FROM transitions WHERE task_id = %s AND reason LIKE %s",
            task.id,
            "%did not take the answer%",
        )
        assert len(told) == 1 and first["id"] in told[0][0]
        # Nothing was applied at the peer: its task still asks.
        ((remote_id, remote_state, _),) = peer_tasks(peer)
        assert remote_state == "input_required" and answered_at_peer(peer, remote_id) == []
        # The person gives up: the cancel reaches the peer (the key may cancel).
        await client.cancel_task(CancelTaskRequest(id=task.id))
        assert (await wait_for(client, task.id, timeout=30)).status.state == CANCELED
    await until_true(lambda: peer_tasks(peer)[0][1] == "canceled")


@pytest.mark.slow
async def test_a_cancel_reaches_a_peer_that_was_down_when_it_was_given(
    start_agent: StartAgent, peer: AgentProcess, database_url: str
) -> None:
    key = peer_key(peer)
    server = start_agent("serve", "retry-4", **peer_env(peer, key))
    slow = {"goal": "wait", "items": [item("wait", "sleep 60", "true")]}
    items = [delegated_plan(slow, "true", "wait")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "cancel", "items": items}}))
        remote_id = await until(lambda: _remote_of(database_url, task.id))
        await until_true(lambda: peer_tasks(peer)[0][1] == "working")
        peer.kill()
        await client.cancel_task(CancelTaskRequest(id=task.id))
        canceled = await wait_for(client, task.id, timeout=30)
    assert canceled.status.state == CANCELED
    # The cancel did not reach the peer: the delegation waits for it, and it is tried again.
    tried = f"could not cancel task {remote_id} at peer helper"
    await until_true(lambda: server.log().count(tried) >= 2)
    assert rows(database_url, "SELECT state FROM delegations WHERE task_id = %s", task.id) == [
        ("pending",)
    ]
    started = time.monotonic()
    peer.start()  # its run of the task resumes: the task works at the peer again
    async with a2a_client(peer.url, key=key) as client:
        at_peer = await wait_for(client, remote_id, timeout=60)
    assert at_peer.status.state == CANCELED
    assert time.monotonic() - started < 45  # by our cancel, not by its 60 s sleep ending
    await until_true(
        lambda: (
            rows(database_url, "SELECT state FROM delegations WHERE task_id = %s", task.id)
            == [("ended",)]
        )
    )
    ((result,),) = rows(database_url, "SELECT result FROM delegations WHERE task_id = %s", task.id)
    assert result["state"] == "canceled"
