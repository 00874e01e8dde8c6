"""CrewAI (`crewai[a2a]`): the delegation its A2A wrapper runs when a crew's agent hands a task
to a remote A2A agent (`aexecute_a2a_delegation`), called directly: no model on this side.
CrewAI sends text parts only, so the plans travel as text (PLAN-JSON, as for Strands).

Its three update modes: streaming (the default; resubscribes on a dropped stream), polling,
and push to a receiver of the caller's own (CrewAI ships the config and a result-store
protocol, not the receiver): here a stdlib HTTP server in this process that records every
notification and hands the 0.3 Task it carries to CrewAI's handler.

Runs in its own environment (tests/clients/venvs.py); typed loosely, not checked by mypy.
"""
# mypy: ignore-errors

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version

from a2a.types import PushNotificationAuthenticationInfo, Task
from crewai.a2a.auth import BearerTokenAuth
from crewai.a2a.updates import PollingConfig, PushNotificationConfig, StreamingConfig
from crewai.a2a.utils.agent_card import afetch_agent_card
from crewai.a2a.utils.delegation import aexecute_a2a_delegation
from driver_common import ANSWER, args, ask_plan, quick_plan, run, short, slow_plan

A = args()
MARK = "PLAN-JSON:"
TIMEOUT = 120


def text_of(payload) -> str:
    """A plan as CrewAI sends it: text. Run commands as plain strings (see drive_strands)."""
    plan = json.loads(json.dumps(payload["plan"]))
    for item in plan["items"]:
        if isinstance(item.get("run"), dict):
            item["run"] = item["run"]["command"]
    return f"Work this plan. {MARK} {json.dumps(plan)}"


def auth() -> BearerTokenAuth:
    return BearerTokenAuth(token=A["key"])


def task_id_of(result) -> str | None:
    """The task id as CrewAI's wrapper takes it: from the newest message that has one."""
    for message in reversed(result.get("history") or []):
        if getattr(message, "task_id", None):
            return message.task_id
    return None


def describe(result) -> dict:
    state = result.get("status")
    found = {
        "state": getattr(state, "value", state),
        "task_id": task_id_of(result),
        "result": short(result.get("result"), 300),
    }
    if result.get("error"):
        found["reported_error"] = short(result.get("error"))
    return found


async def delegate(text, updates, **extra):
    return await aexecute_a2a_delegation(
        endpoint=A["url"],
        auth=auth(),
        timeout=TIMEOUT,
        task_description=text,
        updates=updates,
        **extra,
    )


async def discover():
    card = await afetch_agent_card(A["url"], auth=auth(), timeout=30)
    return {
        "crewai": version("crewai"),
        "sdk": version("a2a-sdk"),
        "name": card.name,
        "protocol_version": card.protocol_version,
        "preferred_transport": card.preferred_transport,
    }


async def poll_scenario():
    return describe(await delegate(text_of(quick_plan(A["tag"])), PollingConfig(interval=0.5)))


async def stream_scenario():
    return describe(await delegate(text_of(quick_plan(A["tag"])), StreamingConfig()))


async def cancel_scenario():
    # No cancel in CrewAI's client: the operator cancels; what CrewAI reports is the result.
    return describe(await delegate(text_of(slow_plan("cancel-" + A["tag"])), StreamingConfig()))


async def input_required_scenario():
    """CrewAI ends the turn at input-required; its wrapper's next turn sends the crew's
    follow-up with the conversation so far and the task and context ids of the newest
    message (wrapper.py keeps the task id after input-required, drops it after completed)."""
    first = await delegate(text_of(ask_plan(A["tag"])), PollingConfig(interval=0.5))
    asked = describe(first)
    history = list(first.get("history") or [])
    latest = history[-1]
    second = await delegate(
        ANSWER,
        PollingConfig(interval=0.5),
        conversation_history=history,
        task_id=latest.task_id,
        context_id=latest.context_id,
    )
    answered = describe(second)
    return {
        "task_id": asked["task_id"],
        "asked_state": asked["state"],
        "answered_task_id": answered["task_id"],
        "state": answered["state"],
        "answer": answered,
    }


class Store:
    """CrewAI's PushNotificationResultStore, fed by the receiver below."""

    def __init__(self):
        self.tasks: dict[str, Task] = {}

    async def wait_for_result(self, task_id, timeout, poll_interval=1.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            task = self.tasks.get(task_id)
            if task is not None and task.status.state.value in (
                "completed",
                "canceled",
                "failed",
                "rejected",
                "input-required",
            ):
                return task
            await asyncio.sleep(min(poll_interval, 0.2))
        return None

    async def get_result(self, task_id):
        return self.tasks.get(task_id)


def receiver(store: Store, seen: list):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            seen.append(
                {
                    "headers": {k.lower(): v for k, v in self.headers.items()},
                    "raw": base64.b64encode(raw).decode(),
                }
            )
            try:
                task = Task.model_validate_json(raw)  # a 0.3 config gets the 0.3 Task
                store.tasks[task.id] = task
            except Exception:  # noqa: BLE001 - recorded above; the test says what it was
                pass
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def push_scenario():
    store, seen = Store(), []
    server = receiver(store, seen)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/crewai-hook"
        config = PushNotificationConfig(
            url=url,
            token=A["push_token"],
            # The HMAC the service signs with, in CrewAI's spelling of the mode.
            authentication=PushNotificationAuthenticationInfo(
                schemes=["hmac_sha256"], credentials=A["push_secret"]
            ),
            result_store=store,
            interval=0.2,
            timeout=90,
        )
        result = describe(await delegate(text_of(quick_plan(A["tag"])), config))
        await asyncio.sleep(1)  # the last notifications after the terminal one
    finally:
        server.shutdown()
    return {**result, "received": seen}


run(
    {
        "discover": discover,
        "poll": poll_scenario,
        "stream": stream_scenario,
        "cancel": cancel_scenario,
        "input_required": input_required_scenario,
        "push": push_scenario,
    },
    A["scenarios"],
)
