"""Streams that resume: event ids, Last-Event-ID, and a subscriber on another API process."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import psycopg
from a2a.client.client import ClientCallContext
from a2a.types.a2a_pb2 import SubscribeToTaskRequest, TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent


def slow_plan(n: int = 5) -> list[dict[str, Any]]:
    return [item(f"i{k}", "sleep 0.4", "true") for k in range(n)]


def subscribe_body(task_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}


def stream_message_body(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"data": {"plan": {"goal": "streamed", "items": items}}}],
            }
        },
    }


def read_sse(
    url: str,
    task_id: str,
    *,
    headers: dict[str, str] | None = None,
    stop_after: int = 0,
    body: dict[str, Any] | None = None,
) -> list[tuple[str | None, dict[str, Any]]]:
    """(SSE id, JSON-RPC result) per frame; stop after `stop_after` frames with an id (0: the
    whole stream). SubscribeToTask unless `body` says otherwise."""
    frames: list[tuple[str | None, dict[str, Any]]] = []
    with (
        httpx.Client(timeout=60) as client,
        client.stream(
            "POST",
            url,
            json=body or subscribe_body(task_id),
            headers={"A2A-Version": "1.0", "Accept": "text/event-stream", **(headers or {})},
        ) as response,
    ):
        assert response.status_code == 200, response.read()
        frame_id: str | None = None
        for line in response.iter_lines():
            if line.startswith("id:"):
                frame_id = line[3:].strip()
            elif line.startswith("data:"):
                frames.append((frame_id, json.loads(line[5:])["result"]))
                frame_id = None
                if stop_after and sum(1 for i, _ in frames if i) >= stop_after:
                    break
    return frames


def seqs(frames: list[tuple[str | None, dict[str, Any]]]) -> list[int]:
    return [int(i.rsplit(":", 1)[1]) for i, _ in frames if i]


def event_seq(database_url: str, task_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT event_seq FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return int(row[0])


async def test_a_raw_sse_client_resumes_after_the_last_event_it_saw(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "stream-1")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(slow_plan()))
    first = read_sse(server.url + "/", task.id, stop_after=4)
    # The snapshot first, with the id of the last event it includes; then the events.
    assert "task" in first[0][1] and first[0][0] == first[0][1]["task"]["metadata"]["eventId"]
    for frame_id, result in first[1:]:
        kind = "statusUpdate" if "statusUpdate" in result else "artifactUpdate"
        assert result[kind]["metadata"]["eventId"] == frame_id  # the id is the event's own
    last = first[-1][0]
    assert last is not None
    rest = read_sse(server.url + "/", task.id, headers={"Last-Event-ID": last})
    assert all(i is not None for i, _ in rest)  # no snapshot on a resume
    got = seqs(first) + seqs(rest)
    final = event_seq(database_url, task.id)
    assert got == list(range(got[0], final + 1))  # no gaps, no repeats, to the end
    assert rest[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # Without the header: the same through the URL; and after the end, only what was missed.
    again = read_sse(f"{server.url}/?lastEventId={last}", task.id)
    assert seqs(again) == seqs(rest)


async def test_a_streamed_message_cut_off_resumes_from_its_last_event_id(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "stream-3")
    first = read_sse(server.url + "/", "", body=stream_message_body(slow_plan(3)), stop_after=1)
    snapshot_id, snapshot = first[0]
    task_id = snapshot["task"]["id"]
    assert snapshot_id == f"{task_id}:{snapshot['task']['metadata']['seq']:g}"
    # Cut off right after the first frame: the resume gets every event after it.
    rest = read_sse(server.url + "/", task_id, headers={"Last-Event-ID": str(snapshot_id)})
    got = seqs(first) + seqs(rest)
    assert got == list(range(got[0], event_seq(database_url, task_id) + 1))
    assert rest[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_the_sdk_client_resumes_with_last_event_id(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "stream-2")
    async with a2a_client(server.url, streaming=True) as client:
        task = await send(client, plan_message(slow_plan(3)))
        seen: list[int] = []
        async for event in client.subscribe(SubscribeToTaskRequest(id=task.id)):
            if event.HasField("status_update"):
                seen.append(int(event.status_update.metadata["seq"]))
            elif event.HasField("artifact_update"):
                seen.append(int(event.artifact_update.metadata["seq"]))
            if len(seen) == 2:
                break  # the client goes away
        context = ClientCallContext(service_parameters={"Last-Event-ID": f"{task.id}:{seen[-1]}"})
        async for event in client.subscribe(SubscribeToTaskRequest(id=task.id), context=context):
            update = event.status_update if event.HasField("status_update") else None
            artifact = event.artifact_update if event.HasField("artifact_update") else None
            assert update is not None or artifact is not None, event
            seen.append(int((update or artifact).metadata["seq"]))  # type: ignore[union-attr]
        done = await wait_for(client, task.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert seen == list(range(seen[0], event_seq(database_url, task.id) + 1))


async def test_a_subscriber_on_another_api_process_sees_every_event(
    start_agent: StartAgent, database_url: str
) -> None:
    runner = start_agent("serve", "stream-a")
    reader = start_agent("serve", "stream-b", "--no-worker")
    async with a2a_client(runner.url) as client:
        task = await send(client, plan_message(slow_plan(3)))
    frames = read_sse(reader.url + "/", task.id, headers={"Last-Event-ID": f"{task.id}:0"})
    assert seqs(frames) == list(range(1, event_seq(database_url, task.id) + 1))
    assert frames[-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_last_event_id_of_another_task_is_refused(start_agent: StartAgent) -> None:
    server = start_agent("serve", "stream-3")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("a", "true", "true")]))
    reply = httpx.post(
        server.url + "/",
        json=subscribe_body(task.id),
        headers={"A2A-Version": "1.0", "Last-Event-ID": "another-task:3"},
    )
    text = reply.text
    assert "-32602" in text and "is not an event of task" in text
