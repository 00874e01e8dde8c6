"""What a caller's retry does: the same messageId, once or twenty times at once, makes one
task and runs every effect once; follow-ups that cannot apply and inline push configs to bad
hosts are refused clearly."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx
import psycopg
import pytest
from a2a.types.a2a_pb2 import (
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
)

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent


def tasks_and_effects(database_url: str) -> tuple[int, int]:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM effects)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def messages_stored(database_url: str) -> tuple[int, int, int]:
    """Tasks, messages and history entries: what a refused message must not add to."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM messages),"
            " (SELECT coalesce(sum(jsonb_array_length(history)), 0) FROM tasks)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def ledger_plan(ledger: Path) -> Message:
    return plan_message(
        [item("once", f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; sleep 0.3', "true")]
    )


async def test_the_same_message_twice_is_one_task(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "retry")
    message = ledger_plan(ledger)
    async with a2a_client(server.url) as client:
        first = await send(client, message)
        again = await send(client, message)  # a retry after a timeout, say
        assert again.id == first.id
        done = await wait_for(client, first.id, timeout=60)
        after = await send(client, message)  # and a late one: the task as it is now
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert after.id == first.id and after.status.state == TaskState.TASK_STATE_COMPLETED
    assert Counter(ledger.read_text().split()) == {f"{first.id}:once:1:run": 1}
    assert tasks_and_effects(database_url)[0] == 1


async def test_twenty_concurrent_sends_of_one_message_are_one_task(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "race")
    message = ledger_plan(ledger)
    async with a2a_client(server.url) as client:
        sent = await asyncio.gather(*(send(client, message) for _ in range(20)))
        ids = {task.id for task in sent}
        assert len(ids) == 1
        (task_id,) = ids
        await wait_for(client, task_id, timeout=60)
    assert Counter(ledger.read_text().split()) == {f"{task_id}:once:1:run": 1}
    assert tasks_and_effects(database_url)[0] == 1
    with psycopg.connect(database_url) as conn:
        runs = conn.execute("SELECT count(*) FROM dbos.workflow_status").fetchone()
    assert runs == (1,)


async def test_a_message_id_used_for_another_message_is_refused(start_agent: StartAgent) -> None:
    server = start_agent("serve", "reuse")
    first = plan_message([item("a", "true", "true")])
    other = plan_message([item("b", "true", "true")])
    other.message_id = first.message_id
    async with a2a_client(server.url) as client:
        task = await send(client, first)
        with pytest.raises(InvalidParamsError, match="already used for a different message"):
            await send(client, other)
        # The retry of the first message, now naming its task, is still the same task.
        first.task_id = task.id
        again = await send(client, first)
    assert again.id == task.id


async def test_follow_ups_and_inline_push_configs_are_refused(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "follow")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("slow", "sleep 30", "true")]))
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING})
        before = messages_stored(database_url)
        # A text is a note for the run (tests/test_pauses.py); a new plan is not taken.
        follow_up = plan_message([item("b", "true", "true")])
        follow_up.message_id, follow_up.task_id = "follow-1", task.id
        with pytest.raises(InvalidParamsError, match="can only be set in the first message"):
            await send(client, follow_up)
        request = SendMessageRequest(
            message=plan_message([item("a", "true", "true")]),
            configuration=SendMessageConfiguration(
                return_immediately=True,
                task_push_notification_config=TaskPushNotificationConfig(url="http://x/hook"),
            ),
        )
        # An inline push config is kept with the new task (tests/test_push.py); one whose
        # host does not resolve is refused, and nothing is stored.
        with pytest.raises(InvalidParamsError, match="does not resolve"):
            async for _ in client.send_message(request):
                pass
        assert messages_stored(database_url) == before
    # The same through JSON-RPC, for the codes.
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "follow-2",
                "role": "ROLE_USER",
                "taskId": task.id,
                "parts": [{"data": {"budget": {"maxUsd": 1}}}],
            }
        },
    }
    reply = httpx.post(f"{server.url}/", json=body, headers={"A2A-Version": "1.0"}).json()
    assert reply["error"]["code"] == -32602
    body["params"] = {
        "message": {"messageId": "p1", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"taskPushNotificationConfig": {"url": "http://x/hook"}},
    }
    reply = httpx.post(f"{server.url}/", json=body, headers={"A2A-Version": "1.0"}).json()
    assert reply["error"]["code"] == -32602 and "does not resolve" in reply["error"]["message"]
    assert messages_stored(database_url) == before
