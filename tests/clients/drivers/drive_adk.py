"""Google ADK: a RemoteA2aAgent run by ADK's own Runner (no model on this side: the remote
agent is the root agent), over whichever a2a-sdk its environment holds (1.x or 0.3).

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import json
from importlib.metadata import version

import httpx
from driver_common import ANSWER, args, ask_plan, quick_plan, run, short, slow_plan
from google.adk.agents.remote_a2a_agent import RemoteA2aAgent
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

A = args()
SDK = version("a2a-sdk")
TAG_OPEN, TAG_CLOSE = b"<a2a_datapart_json>", b"</a2a_datapart_json>"


def data_content(payload) -> types.Content:
    """ADK's own encoding of an A2A DataPart in a genai Part (its part converter turns it
    back into a DataPart on the wire)."""
    if SDK.startswith("0.3"):  # under a2a-sdk 0.3 the blob holds a whole serialized DataPart
        payload = {"kind": "data", "data": payload}
    blob = types.Blob(
        mime_type="text/plain", data=TAG_OPEN + json.dumps(payload).encode() + TAG_CLOSE
    )
    return types.Content(role="user", parts=[types.Part(inline_data=blob)])


def factory(timeout: float):
    """The client factory ADK is given: our key on every request, ADK's timeout."""
    http = httpx.AsyncClient(
        headers={"Authorization": f"Bearer {A['key']}"}, timeout=httpx.Timeout(timeout)
    )
    from a2a.client import ClientConfig, ClientFactory  # noqa: PLC0415 (1.x or 0.3: both)

    return ClientFactory(ClientConfig(httpx_client=http, streaming=True)), http


def runner(timeout: float = 600.0):
    made, http = factory(timeout)
    agent = RemoteA2aAgent(
        name="a2a_agent",
        agent_card=A["url"].rstrip("/") + "/.well-known/agent-card.json",
        a2a_client_factory=made,
        timeout=timeout,
    )
    return Runner(app_name="clients", agent=agent, session_service=InMemorySessionService()), http


def describe(event) -> dict:
    meta = event.custom_metadata or {}
    response = meta.get("a2a:response") or {}
    status = response.get("status") if isinstance(response, dict) else None
    calls = [{"name": c.name, "id": c.id, "args": c.args} for c in event.get_function_calls()]
    return {
        "task_id": meta.get("a2a:task_id"),
        "context_id": meta.get("a2a:context_id"),
        "state": (status or {}).get("state"),
        "error": event.error_message,
        "calls": calls,
        "long_running": sorted(event.long_running_tool_ids or []),
        "text": short(
            " ".join(p.text for p in (event.content.parts if event.content else []) if p.text), 300
        ),
    }


async def drive(r, session, content) -> list[dict]:
    seen = []
    async for event in r.run_async(user_id="u", session_id=session.id, new_message=content):
        seen.append(describe(event))
    return seen


def last_task(events) -> tuple[str | None, str | None]:
    for e in reversed(events):
        if e["task_id"]:
            return e["task_id"], e["state"]
    return None, None


async def follow(payload, timeout: float = 600.0) -> dict:
    r, http = runner(timeout)
    async with http:
        session = await r.session_service.create_session(app_name="clients", user_id="u")
        events = await drive(r, session, data_content(payload))
    task_id, state = last_task(events)
    return {"task_id": task_id, "state": state, "events": events[-4:], "count": len(events)}


async def discover():
    # RemoteA2aAgent resolves the card itself on its first run (the other scenarios); here
    # only what the environment speaks.
    return {"sdk": SDK, "adk": version("google-adk")}


async def stream_scenario():
    return await follow(quick_plan(A["tag"]))


async def long_scenario():
    return await follow(slow_plan(A["tag"], A["long_s"]), timeout=A["client_timeout_s"])


async def cancel_scenario():
    # ADK offers no cancel: someone else (the test, as an operator) cancels the task while
    # ADK follows it; what ADK makes of it is the result.
    return await follow(slow_plan("cancel-" + A["tag"]))


async def input_required_scenario():
    r, http = runner()
    async with http:
        session = await r.session_service.create_session(app_name="clients", user_id="u")
        asked = await drive(r, session, data_content(ask_plan(A["tag"])))
        task_id, state = last_task(asked)
        pause = next((e for e in reversed(asked) if e["long_running"]), None)
        if pause is None:
            return {"task_id": task_id, "asked_state": state, "events": asked[-3:], "paused": False}
        call = next(c for c in pause["calls"] if c["id"] in pause["long_running"])
        # ADK's way to answer a paused function call: the user's FunctionResponse to it.
        reply = types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call["id"], name=call["name"], response={"result": ANSWER}
                    )
                )
            ],
        )
        answered = await drive(r, session, reply)
    final_id, final_state = last_task(answered)
    return {
        "task_id": task_id,
        "asked_state": state,
        "paused": True,
        "call": call["name"],
        "answered_task_id": final_id,
        "state": final_state,
        "events": answered[-3:],
    }


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
