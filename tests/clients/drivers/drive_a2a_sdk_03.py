"""a2a-sdk 0.3.x (A2A 0.3): its ClientFactory over JSON-RPC or REST, against our server.

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import asyncio
import time

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    DataPart,
    Message,
    Part,
    PushNotificationConfig,
    Role,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
    TransportProtocol,
)
from driver_common import ANSWER, args, ask_plan, message_id, quick_plan, run, slow_plan

A = args()
TRANSPORT = {"jsonrpc": TransportProtocol.jsonrpc, "rest": TransportProtocol.http_json}[
    A["transport"]
]
TERMINAL = {"completed", "canceled", "failed", "rejected"}
PAUSED = {"input-required", "auth-required"}


def http() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {A['key']}"}, timeout=60)


async def client(h: httpx.AsyncClient, *, streaming: bool, push_url: str | None = None):
    card = await A2ACardResolver(h, A["url"]).get_agent_card()
    config = ClientConfig(
        httpx_client=h,
        streaming=streaming,
        polling=not streaming,
        supported_transports=[TRANSPORT],
        push_notification_configs=(
            [PushNotificationConfig(url=push_url, token=A["push_token"])] if push_url else []
        ),
    )
    return ClientFactory(config).create(card)


def data_message(payload, task_id=None, context_id=None) -> Message:
    return Message(
        message_id=message_id(),
        role=Role.user,
        parts=[Part(root=DataPart(data=payload))],
        task_id=task_id,
        context_id=context_id,
    )


def state(task: Task) -> str:
    return task.status.state.value


async def first_task(c, message) -> Task:
    async for event in c.send_message(message):
        task, _update = event
        return task
    raise AssertionError("no response")


async def poll(c, task_id: str, until=TERMINAL, timeout: float = 60) -> tuple[Task, int]:
    deadline = time.monotonic() + timeout
    polls = 0
    while True:
        task = await c.get_task(TaskQueryParams(id=task_id))
        polls += 1
        if state(task) in until or time.monotonic() > deadline:
            return task, polls
        await asyncio.sleep(0.2)


async def discover():
    async with http() as h:
        card = await A2ACardResolver(h, A["url"]).get_agent_card()
        c = await client(h, streaming=False)
        return {
            "name": card.name,
            "protocol_version": card.protocol_version,
            "url": card.url,
            "preferred_transport": card.preferred_transport,
            "additional": [i.transport for i in card.additional_interfaces or []],
            "streaming": card.capabilities.streaming,
            "push": card.capabilities.push_notifications,
            "transport_used": type(c._transport).__name__,
        }


async def poll_scenario():
    async with http() as h:
        c = await client(h, streaming=False)
        task = await first_task(c, data_message(quick_plan(A["tag"])))
        first = state(task)
        task, polls = await poll(c, task.id)
        return {"task_id": task.id, "first_state": first, "state": state(task), "polls": polls}


async def stream_scenario():
    async with http() as h:
        c = await client(h, streaming=True)
        states, task = [], None
        async for event in c.send_message(data_message(quick_plan(A["tag"]))):
            task, _update = event
            states.append(state(task))
        return {"task_id": task.id, "state": state(task), "states": states}


async def resubscribe_scenario():
    async with http() as h:
        poller = await client(h, streaming=False)
        task = await first_task(poller, data_message(quick_plan(A["tag"])))
        streamer = await client(h, streaming=True)
        states = []
        async for event in streamer.resubscribe(TaskIdParams(id=task.id)):
            t, _update = event
            states.append(state(t))
        final, _ = await poll(poller, task.id)
        return {"task_id": task.id, "states": states, "state": state(final)}


async def push_scenario():
    async with http() as h:
        c = await client(h, streaming=False, push_url=A["push_url"])
        task = await first_task(c, data_message(quick_plan(A["tag"])))
        final, _ = await poll(c, task.id)
        return {"task_id": task.id, "state": state(final)}


async def cancel_scenario():
    async with http() as h:
        c = await client(h, streaming=False)
        task = await first_task(c, data_message(slow_plan(A["tag"])))
        await poll(c, task.id, until={"working"})
        canceled = await c.cancel_task(TaskIdParams(id=task.id))
        final, _ = await poll(c, task.id)
        return {"task_id": task.id, "cancel_answer": state(canceled), "state": state(final)}


async def input_required_scenario():
    async with http() as h:
        c = await client(h, streaming=True)
        task = None
        async for event in c.send_message(data_message(ask_plan(A["tag"]))):
            task, _update = event
        asked = state(task)
        question = task.status.message.model_dump(mode="json") if task.status.message else None
        answer = Message(
            message_id=message_id(),
            role=Role.user,
            parts=[Part(root=TextPart(text=ANSWER))],
            task_id=task.id,
            context_id=task.context_id,
        )
        states = []
        async for event in c.send_message(answer):
            t, _update = event
            states.append(state(t))
        final, _ = await poll(await client(h, streaming=False), task.id)
        return {
            "task_id": task.id,
            "asked_state": asked,
            "question": question,
            "after_answer": states,
            "state": state(final),
        }


run(
    {
        "discover": discover,
        "poll": poll_scenario,
        "stream": stream_scenario,
        "resubscribe": resubscribe_scenario,
        "push": push_scenario,
        "cancel": cancel_scenario,
        "input_required": input_required_scenario,
    },
    A["scenarios"],
)
