"""The short path itself, in process: `FastReads` answers a plain GetTask on either binding
without reaching the app behind it, and passes everything else on. (tests/test_reads.py shows
its answers equal the SDK's, byte for byte, on a served app.)"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
from starlette.authentication import AuthCredentials, UnauthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.convert import to_task
from a2a_agent.edge.fast_reads import FastReads
from persistence.tasks import PostgresTaskStore
from tests.edge.test_read_cache import V10, _send
from tests.support.db import connection
from tests.support.in_process import InProcess, in_process

LONG_WAY = 599  # what the app behind answers: a request that reached it
V03 = {"A2A-Version": "0.3"}


def _behind(passed: list[str]) -> ASGIApp:
    """The app behind the short path: it notes each request that reached it."""

    async def behind(scope: Scope, receive: Receive, send: Send) -> None:
        passed.append(f"{scope['method']} {scope['path']}")
        await send({"type": "http.response.start", "status": LONG_WAY, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return behind


def _open(fast: FastReads) -> ASGIApp:
    """As the key check leaves a request for an open server: anyone, who may read."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        scope["user"], scope["auth"] = UnauthenticatedUser(), AuthCredentials(["read"])
        await fast(scope, receive, send)

    return app


async def test_a_plain_gettask_is_answered_on_both_bindings_and_the_rest_passes_on(
    database_url: str, home: Path
) -> None:
    async with in_process(database_url, home) as served:
        task_id = await _send(served)
    passed: list[str] = []
    behind = _behind(passed)

    async with in_process(database_url, home) as served:
        store = PostgresTaskStore(served.runtime.pool)  # no read cache: the UPDATE shows
        handler: Any = SimpleNamespace(store=store, task_of=to_task)
        transport = httpx.ASGITransport(app=_open(FastReads(behind, handler, path="/")))
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


async def _tasks(served: InProcess, n: int) -> list[str]:
    """`n` tasks, each past `submitted` (a task no worker took says where it waits, which
    the handler works out), with a status message and a plan artifact."""
    ids = [await _send(served) for _ in range(n)]
    connection(served.runtime.conninfo).execute(
        "UPDATE tasks SET state = 'working', status_text = 'at work' WHERE id = ANY(%s)", (ids,)
    )
    for task_id in ids:
        served.runtime.read_cache.invalidate(task_id)  # as the UPDATE's NOTIFY would
    return ids


def _rpc(method: str, params: dict[str, Any], request_id: object = 5) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def test_each_read_answers_as_the_sdk_does_byte_for_byte(
    database_url: str, home: Path
) -> None:
    """GetTask at 0.3 and ListTasks at 1.0, on both bindings: the short path's answer and
    content type are the SDK's route's (which answers the same call when the version is
    written with its patch number, "0.3.0" or "1.0.0", a form the short path passes on):
    GetTask's bytes, ListTasks' JSON."""
    async with in_process(database_url, home) as served:
        ids = await _tasks(served, 3)
        http, task_id = served.http, ids[0]

        async def both(
            method: str,
            url: str,
            short: dict[str, str],
            sdk: dict[str, str],
            *,
            same_bytes: bool = True,
            **kw: Any,
        ) -> dict[str, Any]:
            one = await http.request(method, url, headers=short, **kw)
            other = await http.request(method, url, headers=sdk, **kw)
            assert one.status_code == other.status_code == 200, (url, one.text)
            # A page's tasks are copies in the SDK's answer, and a copied protobuf Struct
            # (metadata, data parts) may list its keys in another order: the same JSON.
            assert one.content == other.content if same_bytes else one.json() == other.json()
            assert one.headers["content-type"] == other.headers["content-type"]
            answer: dict[str, Any] = one.json()
            return answer

        v03: dict[str, str] = {}  # a 0.3 client sends no version
        v030, v100 = {"A2A-Version": "0.3.0"}, {"A2A-Version": "1.0.0"}
        for history in (None, 0, 1):
            params: dict[str, Any] = {"id": task_id}
            query = ""
            if history is not None:
                params["historyLength"] = history
                query = f"?historyLength={history}"
            rpc = await both("POST", "/", v03, v030, json=_rpc("tasks/get", params, "r-1"))
            assert rpc["result"]["id"] == task_id and rpc["result"]["kind"] == "task"
            rest = await both("GET", f"/v1/tasks/{task_id}{query}", v03, v030)
            assert rest["id"] == task_id
            # The 0.3 client's own header says 0.3 too.
            said = await http.post("/", json=_rpc("tasks/get", params, "r-1"), headers=V03)
            assert said.json() == rpc
        listed = {"same_bytes": False}
        first = await both(
            "POST", "/", V10, v100, json=_rpc("ListTasks", {"pageSize": 2}), **listed
        )
        page = first["result"]
        assert len(page["tasks"]) == 2 and page["totalSize"] == 3 and page["nextPageToken"]
        assert "artifacts" not in page["tasks"][0]
        token = page["nextPageToken"]
        pages: list[dict[str, Any]] = [
            {"pageSize": 2, "pageToken": token},
            {"historyLength": 0, "includeArtifacts": True},
            {"status": "TASK_STATE_WORKING", "contextId": page["tasks"][0]["contextId"]},
            {},
        ]
        for params in pages:
            rpc = (await both("POST", "/", V10, v100, json=_rpc("ListTasks", params), **listed))[
                "result"
            ]
            query = "&".join(
                f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items()
            )
            rest = await both("GET", f"/tasks?{query}", V10, v100, **listed)
            assert rest == rpc, params
        assert {t["id"] for t in rpc["tasks"]} == set(ids)
        last = (await http.get(f"/tasks?pageSize=2&pageToken={token}", headers=V10)).json()
        assert [t["id"] for t in last["tasks"]] == [i for i in ids if i not in
                                                    {t["id"] for t in page["tasks"]}]  # fmt: skip
        # Errors are the SDK's, with its codes.
        bad = await http.post("/", json=_rpc("ListTasks", {"pageSize": 0}), headers=V10)
        assert bad.json()["error"]["code"] == -32602
        assert (await http.get("/tasks?pageSize=0", headers=V10)).status_code == 400
        missing = await http.post("/", json=_rpc("tasks/get", {"id": "nope"}), headers=v03)
        assert missing.json()["error"]["code"] == -32001
        assert (await http.get("/v1/tasks/nope")).status_code == 404


async def test_every_plain_read_is_answered_without_the_app_behind(
    database_url: str, home: Path
) -> None:
    passed: list[str] = []
    behind = _behind(passed)

    async with in_process(database_url, home) as served:
        ids = await _tasks(served, 2)
        fast = FastReads(behind, served.app.state.handler, path="/")
        transport = httpx.ASGITransport(app=_open(fast))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            for method, url, headers, body in (
                ("POST", "/", V10, _rpc("ListTasks", {"pageSize": 1})),
                ("POST", "/", {}, _rpc("tasks/get", {"id": ids[0]})),
                ("POST", "/", V03, _rpc("tasks/get", {"id": ids[0], "historyLength": 1})),
                ("GET", "/tasks?pageSize=1&includeArtifacts=true", V10, None),
                ("GET", f"/v1/tasks/{ids[1]}?historyLength=0", {}, None),
            ):
                answer = await http.request(method, url, headers=headers, json=body)
                assert answer.status_code == 200, (url, answer.text)
            assert passed == []
            for method, url, headers, body in (
                (
                    "POST",
                    "/",
                    V10,
                    _rpc("ListTasks", {"statusTimestampAfter": "2026-01-01T00:00:00Z"}),
                ),
                ("POST", "/", V10, _rpc("ListTasks", {"pageSize": 0})),
                ("POST", "/", V03, _rpc("tasks/get", {"id": ids[0], "metadata": {}})),
                ("POST", "/", V10, _rpc("tasks/get", {"id": ids[0]})),
                ("GET", "/tasks?pageSize=1&pageSize=2", V10, None),
                ("GET", "/tasks", V03, None),
                ("GET", f"/v1/tasks/{ids[1]}", V10, None),
                ("GET", f"/v1/tasks/{ids[1]}?historyLength=x", {}, None),
            ):
                answer = await http.request(method, url, headers=headers, json=body)
                assert answer.status_code == LONG_WAY, (url, body)
            assert len(passed) == 8
