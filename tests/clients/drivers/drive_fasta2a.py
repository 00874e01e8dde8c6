"""fasta2a (pydantic): its A2AClient (send_message, stream_message, get_task) against ours.

Two phases, since fasta2a cannot learn a task's id from our answers: `send` sends the plans
and reports what the client parsed; `follow` is given the ids (found in the server's record)
and polls and answers with `get_task` / `send_message`, as a caller that knows them would.

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import asyncio
import time
from importlib.metadata import version

import httpx
from driver_common import ANSWER, args, ask_plan, message_id, quick_plan, run, short
from fasta2a.client import A2AClient

A = args()


def client(fetch_card: bool = False) -> A2AClient:
    """fasta2a's client on the server's URL (the card is optional to it; see discover)."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {A['key']}"}, timeout=60)
    return A2AClient(A["url"].rstrip("/") + "/", http_client=http, fetch_card=fetch_card)


def data(payload, **extra):
    return {"role": "user", "parts": [{"data": payload}], "message_id": message_id(), **extra}


async def poll(c, task_id, until=("completed", "canceled", "failed", "rejected")):
    deadline = time.monotonic() + 60
    polls = 0
    while True:
        got = await c.get_task(task_id)
        polls += 1
        task = got.get("result")
        if task is None or task["status"]["state"] in until or time.monotonic() > deadline:
            return got, polls
        await asyncio.sleep(0.2)


async def discover():
    try:
        c = client(fetch_card=True)
    except Exception as e:  # noqa: BLE001 - what its card model says is the result
        return {"fasta2a": version("fasta2a"), "card_error": short(e, 800)}
    card = c.agent_card or {}
    return {"fasta2a": version("fasta2a"), "name": card.get("name")}


async def send_quick():
    sent = await client().send_message(
        data(quick_plan(A["tag"])), configuration={"blocking": False}
    )
    return {"parsed": sent, "result_keys": sorted(sent.get("result") or {})}


async def send_ask():
    sent = await client().send_message(data(ask_plan(A["tag"])), configuration={"blocking": False})
    return {"parsed": sent, "result_keys": sorted(sent.get("result") or {})}


async def stream_scenario():
    seen = []
    async for event in client().stream_message(data(quick_plan("stream-" + A["tag"]))):
        seen.append(event)
    return {
        "events": len(seen),
        "result_keys": sorted({k for e in seen for k in (e.get("result") or {})}),
        "last": short(seen[-1] if seen else None),
    }


async def follow_poll():
    """`get_task` with the id: fasta2a sends `"id": null` on `tasks/get` (0.3's GetTaskRequest
    requires a string or number id), so the server refuses the request (-32600) and
    fasta2a's response model, which allows only -32001 there, raises."""
    try:
        got, polls = await poll(client(), A["quick_id"])
    except Exception as e:  # noqa: BLE001 - what happens is the result
        return {"get_error": short(e, 800)}
    task = got.get("result") or {}
    return {"task_id": task.get("id"), "state": task.get("status", {}).get("state"), "polls": polls}


async def follow_answer():
    """The answer on the same task, with the ids the caller was given."""
    answer = {
        "role": "user",
        "parts": [{"text": ANSWER}],
        "message_id": message_id(),
        "task_id": A["ask_id"],
        "context_id": A["ask_context_id"],
    }
    replied = await client().send_message(answer, configuration={"blocking": False})
    return {
        "task_id": A["ask_id"],
        "reply": replied,
        "result_keys": sorted(replied.get("result") or {}),
    }


run(
    {
        "discover": discover,
        "send_quick": send_quick,
        "send_ask": send_ask,
        "stream": stream_scenario,
        "follow_poll": follow_poll,
        "follow_answer": follow_answer,
    },
    A["scenarios"],
)
