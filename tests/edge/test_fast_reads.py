"""The short path itself, in process: `FastGetTask` answers a plain GetTask on either binding
without reaching the app behind it, and passes everything else on. (tests/test_reads.py shows
its answers equal the SDK's, byte for byte, on a served app.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from starlette.authentication import AuthCredentials, UnauthenticatedUser
from starlette.types import Receive, Scope, Send

from a2a_agent.edge.convert import to_task
from a2a_agent.edge.fast_reads import FastGetTask
from persistence.tasks import PostgresTaskStore
from tests.edge.test_read_cache import V10, _send
from tests.support.db import connection
from tests.support.in_process import in_process

LONG_WAY = 599  # what the app behind answers: a request that reached it


async def test_a_plain_gettask_is_answered_on_both_bindings_and_the_rest_passes_on(
    database_url: str, home: Path
) -> None:
    async with in_process(database_url, home) as served:
        task_id = await _send(served)
    passed: list[str] = []

    async def behind(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": LONG_WAY, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async with in_process(database_url, home) as served:
        store = PostgresTaskStore(served.runtime.pool)  # no read cache: the UPDATE shows
        handler: Any = SimpleNamespace(store=store, task_of=to_task)
        fast = FastGetTask(behind, handler, path="/")

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            # As the key check leaves it for an open server: anyone, who may read.
            scope["user"], scope["auth"] = UnauthenticatedUser(), AuthCredentials(["read"])
            await fast(scope, receive, send)

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            params = {"id": task_id, "historyLength": 1}
            body = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": params}
            # Not yet taken by a worker: it says where it waits, which the handler computes.
            assert (await http.get(f"/tasks/{task_id}", headers=V10)).status_code == LONG_WAY
            passed.clear()
            connection(database_url).execute(
                "UPDATE tasks SET state = 'working' WHERE id = %s", (task_id,)
            )
            rest = await http.get(f"/tasks/{task_id}?historyLength=1", headers=V10)
            rpc = await http.post("/", json=body, headers=V10)
            assert rest.status_code == rpc.status_code == 200
            assert rest.json()["id"] == task_id and rpc.json()["result"] == rest.json()
            assert rest.headers["content-type"] == "application/a2a+json"
            assert passed == []
            for path, headers in (
                (f"/tasks/{task_id}", {"A2A-Version": "0.3"}),
                (f"/tasks/{task_id}?historyLength=-1", V10),
                (f"/tasks/{task_id}?other=1", V10),
                (f"/tasks/{task_id}:subscribe", V10),
                ("/tasks/no-such-task", V10),
            ):
                assert (await http.get(path, headers=headers)).status_code == LONG_WAY, path
            assert len(passed) == 5
