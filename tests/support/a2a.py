"""Driving the service with the a2a-sdk client, as an orchestrator would."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.client.errors import A2AClientError
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.struct_pb2 import Value

TERMINAL: set[int] = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
}


@asynccontextmanager
async def a2a_client(
    url: str, *, streaming: bool = False, key: str | None = None
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        client = await create_client(url, ClientConfig(streaming=streaming, httpx_client=http))
        try:
            yield client
        finally:
            await client.close()


def item(
    item_id: str, run: str | dict[str, Any], verify: str | dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {"id": item_id, "title": f"Item {item_id}", "run": run, "verify": verify, **extra}


def plan_message(
    items: Sequence[dict[str, Any]], goal: str = "test plan", *, task_id: str = ""
) -> Message:
    value = Value()
    value.struct_value.update({"plan": {"goal": goal, "items": list(items)}})
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=[Part(data=value, media_type="application/json")],
    )


def send_request(message: Message, *, return_immediately: bool = True) -> SendMessageRequest:
    return SendMessageRequest(
        message=message,
        configuration=SendMessageConfiguration(return_immediately=return_immediately),
    )


async def send(client: Client, message: Message, *, return_immediately: bool = True) -> Task:
    async for response in client.send_message(
        send_request(message, return_immediately=return_immediately)
    ):
        assert response.HasField("task"), response
        return response.task
    raise AssertionError("no response")


async def wait_for(
    client: Client, task_id: str, states: set[int] | None = None, timeout: float = 60
) -> Task:
    """Poll GetTask until the task reaches one of `states` (default: any terminal state)."""
    wanted = states or TERMINAL
    deadline = time.monotonic() + timeout
    state = "unknown"
    while True:
        try:
            task = await client.get_task(GetTaskRequest(id=task_id))
        except A2AClientError:
            # The serving process was replaced mid-request: ask again, as a caller would.
            task = None
        if task is not None:
            if task.status.state in wanted:
                return task
            state = TaskState.Name(task.status.state)
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task_id} still {state}")
        await asyncio.sleep(0.1)


def plan_of(task: Task) -> dict[str, Any]:
    for artifact in task.artifacts:
        if artifact.artifact_id == "plan":
            for data in get_data_parts(artifact.parts):
                return dict(data["plan"])
    raise AssertionError(f"task {task.id} has no plan artifact")


def report_of(task: Task) -> dict[str, Any]:
    for artifact in task.artifacts:
        if artifact.artifact_id == "report":
            for data in get_data_parts(artifact.parts):
                return dict(data["report"])
    raise AssertionError(f"task {task.id} has no report artifact")
