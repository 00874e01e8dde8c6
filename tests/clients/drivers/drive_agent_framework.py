"""Microsoft Agent Framework: its A2AAgent (agent-framework-a2a, a2a-sdk 1.x: A2A 1.0) run
with no model on this side. Its messages carry text, URL or raw-bytes parts only, so the plan
goes as text for the service's (fake) model to plan, beside a raw-bytes file that seeds the
workspace. Followed its own ways: `background=True` and `poll_task`, a continuation token
resumed with `SubscribeToTask` by a fresh agent, the streamed run, and the session that
answers an input-required task on the same task.

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import asyncio
import json
import time
from importlib.metadata import version

import httpx
from a2a.client import A2ACardResolver
from a2a.types import CancelTaskRequest, TaskState
from agent_framework import Content, Message
from agent_framework_a2a import A2AAgent, A2AContinuationToken
from driver_common import ANSWER, args, ask_plan, quick_plan, run, short, slow_plan

A = args()
MARK = "PLAN-JSON:"
SEED = "one from the caller's file\n"  # the raw-bytes file; the server names it file-0


def text_of(payload) -> str:
    """A plan as this client can send it: text. Run commands go as plain strings (the
    service's model path refuses `{"command", "timeoutS"}` today; see docs/clients.md)."""
    plan = json.loads(json.dumps(payload["plan"]))
    for item in plan["items"]:
        if isinstance(item.get("run"), dict):
            item["run"] = item["run"]["command"]
    return f"Work this plan. {MARK} {json.dumps(plan)}"


def http(timeout: float = 120.0) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        headers={"Authorization": f"Bearer {A['key']}"}, timeout=httpx.Timeout(timeout)
    )


async def card_of(client: httpx.AsyncClient):
    return await A2ACardResolver(client, A["url"]).get_agent_card()


async def agent(client: httpx.AsyncClient, bindings: list[str] | None = None) -> A2AAgent:
    """As the framework's samples make one: the card resolved first, then the agent from it
    (its transport negotiated from the card's interfaces; JSONRPC unless `bindings` says
    otherwise), our key on the httpx client."""
    card = await card_of(client)
    return A2AAgent(agent_card=card, http_client=client, supported_protocol_bindings=bindings)


def transport(a: A2AAgent) -> str:
    return type(a.client._transport).__name__  # which binding the factory chose


def task_of(response):
    """The A2A Task behind a response (its updates keep it as their raw representation)."""
    raws = response.raw_representation
    for raw in reversed(raws if isinstance(raws, list) else [raws]):
        for found in (raw, getattr(raw, "raw_representation", None)):
            if found is not None and hasattr(found, "status") and hasattr(found, "artifacts"):
                return found
    return None


def state_of(response) -> str | None:
    raws = response.raw_representation
    for raw in reversed(raws if isinstance(raws, list) else [raws]):
        for found in (raw, getattr(raw, "raw_representation", None)):
            status = getattr(found, "status", None)
            if status is not None and hasattr(status, "state"):
                return TaskState.Name(status.state)
    return None


def describe(response) -> dict:
    token = response.continuation_token
    return {
        "state": state_of(response),
        "token": dict(token) if token else None,
        "text": short(response.text, 300),
        "messages": len(response.messages),
        "mentions_tag": A["tag"] in (response.text or ""),
        "inputs": [r.text for r in response.user_input_requests],
    }


async def discover():
    async with http() as client:
        card = await card_of(client)
        a = A2AAgent(agent_card=card, http_client=client)
        return {
            "agent_framework_a2a": version("agent-framework-a2a"),
            "sdk": version("a2a-sdk"),
            "name": a.name,
            "card_name": card.name,
            "interfaces": [
                [i.protocol_binding, i.protocol_version] for i in card.supported_interfaces
            ],
            "streaming": card.capabilities.streaming,
        }


async def poll_scenario():
    """`background=True`: the send returns at once (returnImmediately) with a continuation
    token; `poll_task` (GetTask) until the token is gone. The message: the plan as text and a
    raw-bytes file (Content.from_data) that item `one` copies."""
    payload = quick_plan(A["tag"])
    payload["plan"]["items"][0]["run"] = "cp file-0 one.txt"
    message = Message(
        "user",
        [
            Content.from_text(text_of(payload)),
            Content.from_data(data=SEED.encode(), media_type="text/plain"),
        ],
    )
    async with http() as client:
        a = await agent(client)
        first = await a.run(message, background=True)
        token = first.continuation_token
        polls, seen = 0, []
        last = first
        while token is not None and polls < 600:
            await asyncio.sleep(0.25)
            last = await a.poll_task(token)
            polls += 1
            seen.append(state_of(last))
            token = last.continuation_token
    task = task_of(last)
    return {
        "first": describe(first),
        "task_id": (first.continuation_token or {}).get("task_id"),
        "polls": polls,
        "states": sorted({s for s in seen if s}),
        "final": describe(last),
        "artifacts": [x.artifact_id for x in task.artifacts] if task is not None else None,
    }


async def resume_scenario():
    """A background send, its token kept as JSON, and a fresh agent (new connection, the
    HTTP+JSON binding) that resumes it: `run(continuation_token=...)` subscribes
    (SubscribeToTask) to the end."""
    async with http() as client:
        a = await agent(client)
        first = await a.run(text_of(quick_plan("resume-" + A["tag"])), background=True)
        sent_over = transport(a)
    kept = json.dumps(first.continuation_token)
    async with http() as client:
        again = await agent(client, ["HTTP+JSON"])
        resumed = await again.run(continuation_token=A2AContinuationToken(**json.loads(kept)))
        resumed_over = transport(again)
    return {
        "first": describe(first),
        "task_id": json.loads(kept)["task_id"],
        "resumed": describe(resumed),
        "transports": [sent_over, resumed_over],
    }


async def stream_scenario():
    """`run(stream=True)`: the streamed send (SendStreamingMessage) followed update by update."""
    updates = []
    async with http() as client:
        a = await agent(client)
        stream = a.run(text_of(quick_plan("stream-" + A["tag"])), stream=True)
        async for update in stream:
            raw = update.raw_representation
            kind = type(raw).__name__
            state = getattr(getattr(raw, "status", None), "state", None)
            task_id = getattr(raw, "task_id", None) or getattr(raw, "id", None)
            updates.append(
                {
                    "kind": kind,
                    "task_id": task_id,
                    "state": TaskState.Name(state) if state is not None else None,
                    "text": short(update.text, 120),
                }
            )
        final = await stream.get_final_response()
    task_ids = sorted({u["task_id"] for u in updates if u["task_id"]})
    states = [u["state"] for u in updates if u["state"]]
    return {
        "task_ids": task_ids,
        "task_id": task_ids[0] if len(task_ids) == 1 else None,
        "count": len(updates),
        "state": states[-1] if states else None,
        "kinds": sorted({u["kind"] for u in updates}),
        "final_text": short(final.text, 300),
    }


async def cancel_scenario():
    """A2AAgent has no cancel; its public `client` attribute is the a2a-sdk Client it drives,
    whose CancelTask takes the token's task id. A fresh agent resumes the token meanwhile and
    is left to see the end."""
    async with http() as client:
        a = await agent(client)
        first = await a.run(text_of(slow_plan("cancel-" + A["tag"])), background=True)
        token = first.continuation_token
        planned, deadline = None, time.monotonic() + 60
        while planned is None and time.monotonic() < deadline:  # planned: the plan artifact
            polled = await a.poll_task(token)
            task = task_of(polled)
            if task is not None and any(x.artifact_id == "plan" for x in task.artifacts):
                planned = TaskState.Name(task.status.state)
            else:
                await asyncio.sleep(0.25)
        async with http(600) as other:
            follower = await agent(other)
            following = asyncio.ensure_future(follower.run(continuation_token=token))
            await asyncio.sleep(1.0)  # subscribed before the cancel
            canceled = await a.client.cancel_task(CancelTaskRequest(id=token["task_id"]))
            followed = await asyncio.wait_for(following, 60)
        after = await a.poll_task(token)
    return {
        "task_id": token["task_id"],
        "planned_state": planned,
        "cancel_answer": TaskState.Name(canceled.status.state),
        "followed": describe(followed),
        "polled": describe(after),
    }


async def input_required_scenario():
    """The question comes back as a user-input request on the response; the session keeps
    the task id and its input-required state, so the next run on the same session sends the
    answer with that taskId (the same task)."""
    async with http() as client:
        a = await agent(client)
        session = a.create_session()
        asked = await a.run(text_of(ask_plan(A["tag"])), session=session)
        kept = dict(session.service_session_id or {})
        answered = await a.run(ANSWER, session=session)
        after = dict(session.service_session_id or {})
    requests = asked.user_input_requests
    return {
        "task_id": kept.get("task_id"),
        "asked": describe(asked),
        "asked_state": TaskState.Name(kept["task_state"]) if "task_state" in kept else None,
        "request_ids": [r.id for r in requests],
        "answered_task_id": after.get("task_id"),
        "state": TaskState.Name(after["task_state"]) if "task_state" in after else None,
        "answered": describe(answered),
    }


run(
    {
        "discover": discover,
        "poll": poll_scenario,
        "resume": resume_scenario,
        "stream": stream_scenario,
        "cancel": cancel_scenario,
        "input_required": input_required_scenario,
    },
    A["scenarios"],
)
