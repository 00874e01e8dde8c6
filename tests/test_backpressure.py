"""Backpressure that says so (issue 25): a task no worker has taken says where it waits, on
both bindings; a caller past its limit of tasks that have not ended is refused with a
sentence that says why and what to do, nothing is stored, and a retry, a cancel and a new
task once one ended all go through."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.processes import AgentProcess, serving

pytestmark = pytest.mark.served
V10 = {"A2A-Version": "1.0"}
LIMIT = 3


@pytest.fixture(scope="module")
def server(module_place: tuple[str, Path]) -> Iterator[AgentProcess]:
    # An API without a worker: what it takes waits in the queue until a worker comes.
    database_url, home = module_place
    limit = {"A2A_AGENT_MAX_ACTIVE_TASKS": str(LIMIT)}
    with serving(database_url, home, "queued", "--no-worker", **limit) as process:
        yield process


def message(message_id: str | None = None) -> dict[str, Any]:
    plan = {"goal": "wait", "items": [{"id": "a", "run": "true", "verify": "true"}]}
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": {"plan": plan}, "mediaType": "application/json"}],
    }


def rpc(server: AgentProcess, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = httpx.post(f"{server.url}/", json=body, headers=V10, timeout=30)
    assert reply.status_code == 200
    answer: dict[str, Any] = reply.json()
    return answer


def send(server: AgentProcess, msg: dict[str, Any]) -> dict[str, Any]:
    params = {"message": msg, "configuration": {"returnImmediately": True}}
    return rpc(server, "SendMessage", params)


def status_text(task: dict[str, Any]) -> str:
    return str(task["status"]["message"]["parts"][0]["text"])


def stored(server: AgentProcess) -> int:
    with psycopg.connect(server.env["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT count(*) FROM tasks").fetchone()
    return int(row[0]) if row else 0


def test_queued_tasks_say_where_they_wait_and_a_caller_past_its_limit_is_told(
    server: AgentProcess,
) -> None:
    first = message()
    ids = [send(server, m)["result"]["task"]["id"] for m in (first, message(), message())]
    # Each says how many wait ahead of it, over JSON-RPC and over HTTP+JSON alike.
    for n, task_id in enumerate(ids):
        got = rpc(server, "GetTask", {"id": task_id})["result"]
        assert got["status"]["state"] == "TASK_STATE_SUBMITTED"
        where = "next" if n == 0 else f"behind {n} other task{'s' if n > 1 else ''}"
        assert status_text(got) == f"queued {where}: it starts when a worker takes it"
        rest = httpx.get(f"{server.url}/tasks/{task_id}", headers=V10, timeout=30).json()
        assert status_text(rest) == status_text(got)

    # A fourth is refused, on both bindings, with what to do; nothing is stored.
    refused = send(server, message())["error"]
    assert refused["code"] == -32600
    assert f"has {LIMIT} tasks that have not ended" in refused["message"]
    assert "A2A_AGENT_MAX_ACTIVE_TASKS" in refused["message"]
    assert "nothing was stored" in refused["message"]
    over_rest = httpx.post(
        f"{server.url}/message:send",
        json={"message": message(), "configuration": {"returnImmediately": True}},
        headers=V10,
        timeout=30,
    )
    assert over_rest.status_code == 400
    assert "A2A_AGENT_MAX_ACTIVE_TASKS" in over_rest.json()["error"]["message"]
    assert stored(server) == LIMIT

    # A retry of a message that made its task is answered with that task, not refused.
    again = send(server, first)["result"]["task"]
    assert again["id"] == ids[0]
    # Once one ends (a cancel), a new task is taken; the queue moved up behind it.
    canceled = rpc(server, "CancelTask", {"id": ids[0]})["result"]
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    taken = send(server, message())["result"]["task"]
    assert stored(server) == LIMIT + 1
    got = rpc(server, "GetTask", {"id": taken["id"]})["result"]
    assert status_text(got).startswith("queued behind ")
