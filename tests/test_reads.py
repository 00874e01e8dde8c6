"""GetTask's short path answers byte for byte as the SDK's dispatcher does, and leaves
every other call (and every error) to the SDK."""

from __future__ import annotations

import httpx

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent


def get_task(
    url: str, params: dict[str, object], version: str, request_id: object = 7
) -> httpx.Response:
    return httpx.post(
        f"{url}/",
        json={"jsonrpc": "2.0", "id": request_id, "method": "GetTask", "params": params},
        headers={"A2A-Version": version},
        timeout=10,
    )


async def test_the_short_path_answers_as_the_sdk_does(start_agent: StartAgent) -> None:
    server = start_agent("serve", "reads")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("a", "echo a > a.txt", "test -f a.txt")]))
        await wait_for(client, task.id, timeout=60)
    # "1.0.0" is the same version to the SDK (patch ignored) but not to the short path.
    cases: list[tuple[dict[str, object], object]] = [
        ({"id": task.id}, 7),
        ({"id": task.id, "historyLength": 0}, "req-1"),
        ({"id": task.id, "historyLength": 1}, 0),
    ]
    for params, request_id in cases:
        short = get_task(server.url, params, "1.0", request_id)
        sdk = get_task(server.url, params, "1.0.0", request_id)
        assert short.status_code == sdk.status_code == 200
        assert short.content == sdk.content
        assert short.headers["content-type"] == sdk.headers["content-type"]
        assert short.json()["result"]["id"] == task.id
    # Errors come from the SDK's route, with its codes.
    missing = get_task(server.url, {"id": "no-such-task"}, "1.0").json()
    assert missing["error"]["code"] == -32001
    negative = get_task(server.url, {"id": task.id, "historyLength": -1}, "1.0").json()
    assert negative["error"]["code"] == -32602
    old = get_task(server.url, {"id": task.id}, "0.3").json()
    assert old["error"]["code"] == -32009
    unknown = get_task(server.url, {"id": task.id, "extra": 1}, "1.0").json()
    assert unknown["result"]["id"] == task.id  # the SDK ignores unknown fields; so do we


async def test_the_short_path_answers_rest_gettask_as_the_sdk_does(
    start_agent: StartAgent,
) -> None:
    """`GET /tasks/{id}` at 1.0: the same bytes and headers as the SDK's REST route, which
    answers the same call when the version is written "1.0.0"; every other form and every
    error is the SDK's."""
    server = start_agent("serve", "rest-reads")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("a", "echo a > a.txt", "test -f a.txt")]))
        await wait_for(client, task.id, timeout=60)

    def get(path: str, version: str | None = "1.0") -> httpx.Response:
        headers = {"A2A-Version": version} if version else {}
        return httpx.get(f"{server.url}{path}", headers=headers, timeout=10)

    for query in ("", "?historyLength=0", "?historyLength=1"):
        short = get(f"/tasks/{task.id}{query}")
        sdk = get(f"/tasks/{task.id}{query}", "1.0.0")
        assert short.status_code == sdk.status_code == 200
        assert short.content == sdk.content
        assert short.headers["content-type"] == sdk.headers["content-type"]
        assert short.json()["id"] == task.id
    # And the same task as the JSON-RPC short path gives.
    rpc = get_task(server.url, {"id": task.id}, "1.0").json()["result"]
    assert get(f"/tasks/{task.id}").json() == rpc
    missing = get("/tasks/no-such-task")
    assert missing.status_code == 404
    assert missing.json()["error"]["status"] == "NOT_FOUND"
    assert get(f"/tasks/{task.id}?historyLength=-1").status_code == 400
    assert get(f"/tasks/{task.id}?other=1").json()["id"] == task.id  # as the SDK does
