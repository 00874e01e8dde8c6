"""Strands Agents: its A2AAgent (stream only, text only) against our server.

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import json
from importlib.metadata import version

import httpx
from a2a.client import ClientConfig
from driver_common import ANSWER, args, ask_plan, quick_plan, run, short, slow_plan
from strands.agent.a2a_agent import A2AAgent

A = args()
MARK = "PLAN-JSON:"


def text_of(payload) -> str:
    """A plan as Strands can send it: text (A2AAgent makes only text parts). Run commands go
    as plain strings: the service's model path refuses `{"command", "timeoutS"}` today (its
    submit_plan input reaches the plan parser without the wire-name conversion; see
    docs/clients.md), and a string command's default timeout covers these items."""
    plan = json.loads(json.dumps(payload["plan"]))
    for item in plan["items"]:
        if isinstance(item.get("run"), dict):
            item["run"] = item["run"]["command"]
    return f"Work this plan. {MARK} {json.dumps(plan)}"


def agent(timeout: float = 300.0) -> tuple[A2AAgent, httpx.AsyncClient]:
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {A['key']}"}, timeout=timeout)
    return A2AAgent(endpoint=A["url"], client_config=ClientConfig(httpx_client=http)), http


async def follow(prompt: str, timeout: float = 300.0) -> dict:
    a, http = agent(timeout)
    task_id, states, result = None, [], None
    async with http:
        async for event in a.stream_async(prompt):
            if "result" in event:
                result = event["result"]
                continue
            raw = event.get("event")
            if isinstance(raw, tuple):
                task = raw[0]
                task_id = task.id
                states.append(task.status.state.value)
    return {
        "task_id": task_id,
        "states": states[-3:],
        "state": states[-1] if states else None,
        "stop_reason": getattr(result, "stop_reason", None),
        "message": short(getattr(result, "message", None), 300),
    }


async def discover():
    a, http = agent()
    async with http:
        card = await a.get_agent_card()
    return {
        "strands": version("strands-agents"),
        "sdk": version("a2a-sdk"),
        "name": a.name,
        "protocol_version": card.protocol_version,
        "streaming": card.capabilities.streaming,
    }


async def stream_scenario():
    return await follow(text_of(quick_plan(A["tag"])))


async def long_scenario():
    return await follow(text_of(slow_plan(A["tag"], A["long_s"])), A["client_timeout_s"])


async def cancel_scenario():
    return await follow(text_of(slow_plan("cancel-" + A["tag"])))


async def input_required_scenario():
    plan = ask_plan(A["tag"])
    # The service's model asks (the item has no command); Strands stops at the question.
    plan["plan"]["items"] = [
        {"id": "name", "title": "ASK What should it be called?", "verify": "test -s name.txt"}
    ]
    asked = await follow(text_of(plan))
    # Strands's only way to say more: another call, which carries no taskId or contextId.
    again = await follow(ANSWER)
    return {**asked, "asked_state": asked["state"], "answer_call": again}


run(
    {
        "discover": discover,
        "stream": stream_scenario,
        "long": long_scenario,
        "cancel": cancel_scenario,
        "input_required": input_required_scenario,
    },
    A["scenarios"],
)
