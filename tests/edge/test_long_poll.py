"""Generations and long polls, in process: GetTask carries the task's generation; a GetTask
that names it waits until the task moves past it (on both bindings and both protocol
versions), answers at once for a task that has ended, and at the end of its wait otherwise;
a follow-up conditioned on a generation is applied only if the task is still there."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.in_process import InProcess, in_process
from tests.test_door import V10, plan_part, quick_item


@pytest.fixture
async def app(database_url: str, home: Path) -> AsyncIterator[InProcess]:
    async with in_process(database_url, home) as running:
        yield running


async def rpc(app: InProcess, method: str, params: dict[str, Any], v03: bool = False) -> Any:
    body = {"jsonrpc": "2.0", "id": 11, "method": method, "params": params}
    response = await app.http.post("/", json=body, headers={} if v03 else V10)
    assert response.status_code == 200, response.text
    return response.json()


async def submit(app: InProcess) -> str:
    message = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "parts": [plan_part(quick_item())],
    }
    sent = await rpc(
        app, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
    )
    return str(sent["result"]["task"]["id"])


def note(task_id: str, text: str, **metadata: Any) -> dict[str, Any]:
    message = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "taskId": task_id,
        "parts": [{"text": text}],
    }
    sent: dict[str, Any] = {"message": message, "configuration": {"returnImmediately": True}}
    return {**sent, "metadata": metadata} if metadata else sent


async def generation(app: InProcess, task_id: str) -> int:
    task = (await rpc(app, "GetTask", {"id": task_id}))["result"]
    return int(task["metadata"]["generation"])


async def answered_after_an_event(app: InProcess, task_id: str, poll: Any) -> Any:
    """`poll` (a coroutine) is still waiting after a while; the task's first event (the run
    taking it: working) moves it on, and the poll then answers."""
    waiting = asyncio.ensure_future(poll)
    await asyncio.sleep(0.5)
    assert not waiting.done()
    await app.runtime.harness.begin_task(task_id)
    return await asyncio.wait_for(waiting, 10)


async def test_a_get_task_naming_the_generation_waits_for_the_next_event(
    app: InProcess,
) -> None:
    # JSON-RPC 1.0: the draft's field, in params.
    task_id = await submit(app)
    seen = await generation(app, task_id)
    assert seen >= 1
    poll = rpc(app, "GetTask", {"id": task_id, "currentGeneration": seen})
    moved = (await answered_after_an_event(app, task_id, poll))["result"]
    assert moved["metadata"]["generation"] > seen
    assert moved["status"]["state"] == "TASK_STATE_WORKING"

    # HTTP+JSON 1.0: query parameters, with historyLength beside them.
    task_id = await submit(app)
    seen = await generation(app, task_id)
    rest = app.http.get(
        f"/tasks/{task_id}", params={"currentGeneration": seen, "historyLength": 1}, headers=V10
    )
    response: httpx.Response = await answered_after_an_event(app, task_id, rest)
    assert response.status_code == 200
    assert response.json()["metadata"]["generation"] > seen and len(response.json()["history"]) == 1

    # A2A 0.3 `tasks/get`: in the params' metadata.
    task_id = await submit(app)
    seen = await generation(app, task_id)
    old = rpc(app, "tasks/get", {"id": task_id, "metadata": {"currentGeneration": seen}}, True)
    assert (await answered_after_an_event(app, task_id, old))["result"]["status"]["state"] == (
        "working"
    )

    # A generation already passed answers at once; so does an ended task, whatever it names.
    now = await generation(app, task_id)
    early = await rpc(app, "GetTask", {"id": task_id, "currentGeneration": now - 1})
    assert early["result"]["metadata"]["generation"] == now
    await rpc(app, "CancelTask", {"id": task_id})
    ended = await rpc(app, "GetTask", {"id": task_id, "currentGeneration": now + 100})
    assert ended["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_long_poll_ends_at_its_timeout_with_the_task_as_it_is(app: InProcess) -> None:
    task_id = await submit(app)
    seen = await generation(app, task_id)
    asked = {"id": task_id, "metadata": {"currentGeneration": seen, "timeoutMs": 300}}
    waiting = asyncio.ensure_future(rpc(app, "GetTask", asked))
    await asyncio.sleep(0.1)
    assert not waiting.done()
    task = (await asyncio.wait_for(waiting, 10))["result"]
    assert task["metadata"]["generation"] == seen and task["id"] == task_id


async def test_a_bad_generation_is_refused_in_the_callers_protocol(app: InProcess) -> None:
    task_id = await submit(app)
    refused = await rpc(app, "GetTask", {"id": task_id, "currentGeneration": -1})
    assert refused["id"] == 11 and refused["error"]["code"] == -32602
    assert "currentGeneration must be a whole number" in refused["error"]["message"]
    alone = await rpc(app, "GetTask", {"id": task_id, "timeoutMs": 100})
    assert "send currentGeneration with it" in alone["error"]["message"]
    response = await app.http.get(
        f"/tasks/{task_id}", params={"currentGeneration": "soon"}, headers=V10
    )
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"
    assert "'soon'" in response.json()["error"]["message"]
    # Not the caller's task: the plain GetTask's answer, at once.
    missing = await rpc(app, "GetTask", {"id": "no-such-task", "currentGeneration": 1})
    assert missing["error"]["code"] == -32001


async def test_a_follow_up_names_the_generation_it_was_written_for(app: InProcess) -> None:
    task_id = await submit(app)
    seen = await generation(app, task_id)
    taken = await rpc(app, "SendMessage", note(task_id, "first", ifGenerationMatch=seen))
    assert taken["result"]["task"]["metadata"]["note"]["text"] == "first"
    assert taken["result"]["task"]["metadata"]["generation"] == seen  # a note is no event

    # The task moves on (an event): the same generation is stale now, refused, and nothing
    # is applied.
    await app.runtime.harness.begin_task(task_id)
    before = (await rpc(app, "GetTask", {"id": task_id}))["result"]
    stale = await rpc(app, "SendMessage", note(task_id, "second", ifGenerationMatch=seen))
    assert stale["error"]["code"] == -32004
    message = stale["error"]["message"]
    assert f"not {seen} (ifGenerationMatch)" in message and "nothing was applied" in message
    after = (await rpc(app, "GetTask", {"id": task_id}))["result"]
    assert after == before

    # On the message's own metadata too; and a value that is no generation is refused.
    current = int(after["metadata"]["generation"])
    assert current > seen
    sent = note(task_id, "third")
    sent["message"]["metadata"] = {"ifGenerationMatch": current}
    assert "result" in await rpc(app, "SendMessage", sent)
    bad = await rpc(app, "SendMessage", note(task_id, "fourth", ifGenerationMatch="latest"))
    assert bad["error"]["code"] == -32602 and "ifGenerationMatch" in bad["error"]["message"]
