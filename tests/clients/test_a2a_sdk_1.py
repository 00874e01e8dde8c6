"""a2a-sdk 1.x (the main environment's, A2A 1.0): `create_client` over JSON-RPC and over
REST, in process. Discover, a plan sent with returnImmediately and polled, a streamed send,
SubscribeToTask (REST: the bodyless `POST /tasks/{id}:subscribe`), cancel, a push config with
HMAC, and a question answered on the same task."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.client import Client
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from tests.clients.harness import (
    ASK_ITEMS,
    CANCELED,
    COMPLETED,
    QUICK_ITEMS,
    Served,
    answer_written,
    check_record,
    expect,
    push_shape,
    push_task_ids,
    verify_push_hmac,
    verify_push_signature,
)
from tests.support.a2a import item, plan_message, send, wait_for
from tests.support.receiver import receiver
from tests.support.secrets import secret

pytestmark = pytest.mark.clients

BINDINGS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON"}
QUICK = [item(i, f"echo {i} > {i}.txt", f"grep -q {i} {i}.txt") for i in QUICK_ITEMS]
ASK = [
    {"id": "name", "title": "Pick a name", "ask": "What should it be called?"},
    item("use", "cp answers/name.md name.txt", "grep -q Heron name.txt"),
]
SLOW = [item("slow", "sleep 120; echo done > slow.txt", "grep -q done slow.txt")]


@asynccontextmanager
async def client_of(served: Served, transport: str, *, streaming: bool) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {served.key}"}
    async with httpx.AsyncClient(timeout=60, headers=headers) as http:
        config = ClientConfig(
            streaming=streaming,
            httpx_client=http,
            supported_protocol_bindings=[BINDINGS[transport]],
        )
        client = await create_client(served.url, config)
        try:
            yield client
        finally:
            await client.close()


def states_of(events: list[Any]) -> list[int]:
    found = []
    for event in events:
        if event.HasField("task"):
            found.append(event.task.status.state)
        elif event.HasField("status_update"):
            found.append(event.status_update.status.state)
    return found


@pytest.mark.parametrize("transport", list(BINDINGS))
async def test_a2a_sdk_1_client_drives_a_plan_every_way_it_offers(
    served: Served, transport: str
) -> None:
    problems: list[str] = []
    hmac_secret = secret(f"hmac-{uuid.uuid4().hex}")
    token = secret(f"push-{uuid.uuid4().hex[:10]}")
    with receiver() as hook:
        async with (
            client_of(served, transport, streaming=False) as poller,
            client_of(served, transport, streaming=True) as streamer,
        ):
            # Poll: returnImmediately, then GetTask until terminal.
            polled = await send(poller, plan_message(QUICK, f"poll {transport}"))
            expect(problems, polled.id, "no task id from a returnImmediately send")

            # Stream: the send stream to the end.
            request = SendMessageRequest(message=plan_message(QUICK, f"stream {transport}"))
            events = [e async for e in streamer.send_message(request)]
            streamed = states_of(events)
            expect(problems, streamed[-1:] == [COMPLETED], f"stream states {streamed}")
            stream_id = events[0].task.id if events and events[0].HasField("task") else ""

            # Subscribe (REST: POST /tasks/{id}:subscribe without a body).
            later = await send(poller, plan_message(QUICK, f"subscribe {transport}"))
            subscribed = [e async for e in streamer.subscribe(SubscribeToTaskRequest(id=later.id))]
            expect(problems, states_of(subscribed)[-1:] == [COMPLETED], f"subscribe {subscribed}")

            # Cancel.
            slow = await send(poller, plan_message(SLOW, f"cancel {transport}"))
            await wait_for(poller, slow.id, {TaskState.TASK_STATE_WORKING})
            canceled = await poller.cancel_task(CancelTaskRequest(id=slow.id))
            expect(problems, canceled.status.state == CANCELED, f"cancel: {canceled.status}")

            # Push with HMAC: a config on the send, scheme HMAC-SHA256, the secret as credentials.
            pushed = await poller_send_with_push(poller, hook.url, token, hmac_secret, transport)

            # A question answered on the same task.
            asked = await send(poller, plan_message(ASK, f"ask {transport}"))
            waiting = await wait_for(poller, asked.id, {TaskState.TASK_STATE_INPUT_REQUIRED})
            expect(problems, waiting.status.message.parts, "the question has no text")
            answer = Message(
                message_id=str(uuid.uuid4()),
                role=Role.ROLE_USER,
                task_id=asked.id,
                context_id=asked.context_id,
                parts=[Part(text="Call it Heron.")],
            )
            await send(poller, answer)

        for label, task_id in (
            ("poll", polled.id),
            ("stream", stream_id),
            ("subscribe", later.id),
            ("push", pushed),
        ):
            await check_record(served, problems, label, task_id, state=COMPLETED, items=QUICK_ITEMS)
        await check_record(served, problems, "cancel", slow.id, state=CANCELED, items=[])
        await check_record(served, problems, "ask", asked.id, state=COMPLETED, items=ASK_ITEMS)
        expect(problems, "Heron" in answer_written(served, asked.id), "answer not written")

        hook.wait_for(
            lambda: any(
                pushed in push_task_ids(r.body) and "TASK_STATE_COMPLETED" in str(r.body)
                for r in hook.accepted()
            ),
            30,
        )
        mine = [r for r in hook.accepted() if pushed in push_task_ids(r.body)]
        shapes = {push_shape(r.body).split(" ", 2)[0] for r in mine}
        expect(problems, shapes == {"1.0"}, f"push bodies for a 1.0 config: {shapes}")
        expect(
            problems,
            {r.headers.get("x-a2a-notification-token") for r in mine} == {token},
            "push token",
        )
        bad = [verify_push_hmac(hmac_secret, r.headers, r.raw) for r in mine]
        bad += [verify_push_signature(served, r.headers, r.raw) for r in mine]
        expect(problems, not any(bad), f"push signatures: {bad}")
    assert not problems, "\n".join(problems)


async def poller_send_with_push(
    client: Client, url: str, token: str, hmac_secret: str, transport: str
) -> str:
    config = TaskPushNotificationConfig(
        url=url,
        token=token,
        authentication=AuthenticationInfo(scheme="HMAC-SHA256", credentials=hmac_secret),
    )
    request = SendMessageRequest(
        message=plan_message(QUICK, f"push {transport}"),
        configuration=SendMessageConfiguration(
            return_immediately=True, task_push_notification_config=config
        ),
    )
    async for response in client.send_message(request):
        await asyncio.sleep(0)
        return str(response.task.id)
    raise AssertionError("no response to the push send")
