"""Every write to a task row reaches the read cache: a parent's budget, charged by its
child's work in SQL (`charge_ancestors()`), shows in the parent's GetTask at once."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from tests.support.in_process import InProcess, in_process

V10 = {"A2A-Version": "1.0"}


async def _send(app: InProcess) -> str:
    plan = {"goal": "g", "items": [{"id": "a", "title": "A", "run": "true", "verify": "true"}]}
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
               "parts": [{"data": {"plan": plan}}]}  # fmt: skip
    params = {"message": message, "configuration": {"returnImmediately": True}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    answer = (await app.http.post("/", json=body, headers=V10)).json()
    return str(answer["result"]["task"]["id"])


async def _budget(app: InProcess, task_id: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    task = (await app.http.post("/", json=body, headers=V10)).json()["result"]
    budget: dict[str, Any] = task["metadata"]["budget"]
    return budget


async def test_a_childs_charge_shows_on_its_parent_at_once(database_url: str, home: Path) -> None:
    async with in_process(database_url, home) as app:
        parent, child = await _send(app), await _send(app)
        assert (await _budget(app, parent))["tokens"]["used"] == 0  # now in the read cache
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE tasks SET parent_id = %s WHERE id = %s", (parent, child))
            conn.execute(
                "SELECT charge_ancestors(%s, %s, %s::jsonb)",
                (child, f"{child}:a:1:run", '{"tokens": 1234, "usd": 0.5, "actions": 1}'),
            )
        deadline = time.monotonic() + 5
        while (await _budget(app, parent))["tokens"]["used"] != 1234:
            assert time.monotonic() < deadline, "the parent's GetTask kept its stale budget"
            await asyncio.sleep(0.05)
