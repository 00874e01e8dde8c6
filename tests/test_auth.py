"""Authentication, principals and scopes: nobody in without a key, nobody sees another's work."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest, TaskState
from a2a.utils.errors import InvalidRequestError

from a2a_agent.edge.auth import DEFAULT_SCOPES, new_key
from persistence.db import create_pool
from persistence.keys import PostgresKeyStore, StoredKey
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import REPO, AgentProcess, StartAgent
from tests.support.secrets import secret

KEYED = {"A2A_AGENT_INSECURE_OPEN": "0"}
A2A = {"A2A-Version": "1.0"}


async def _store_key(database_url: str, stored: StoredKey) -> None:
    pool = create_pool(database_url, max_size=1)
    await pool.open(wait=True, timeout=30)
    try:
        await PostgresKeyStore(pool).create(stored)
    finally:
        await pool.close()


def make_key(server: AgentProcess, principal: str, *scopes: str) -> str:
    """A key made and stored as `a2a-agent keys create` does (`new_key`, `PostgresKeyStore`),
    without a Python start-up per key; the CLI itself is driven in the tests of scopes and
    revoking. Its own loop on a thread: the callers are sync and async tests alike."""
    token, stored = new_key(principal, tuple(scopes or DEFAULT_SCOPES))
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, _store_key(server.env["DATABASE_URL"], stored)).result()
    return secret(token)


def make_key_by_cli(server: AgentProcess, principal: str, *scopes: str) -> str:
    args = [sys.executable, "-m", "a2a_agent", "keys", "create", "--principal", principal]
    for scope in scopes:
        args += ["--scope", scope]
    done = subprocess.run(
        args, check=False, env=server.env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return secret(done.stdout.strip())


def rpc(url: str, method: str, params: dict[str, Any], key: str | None) -> httpx.Response:
    headers = {**A2A, **({"Authorization": f"Bearer {key}"} if key else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url + "/", json=body, headers=headers, timeout=30)


def new_message(**extra: Any) -> dict[str, Any]:
    return {
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": "do nothing"}],
            **extra,
        }
    }


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("SendMessage", new_message()),
    ("GetTask", {"id": "t"}),
    ("ListTasks", {}),
    ("CancelTask", {"id": "t"}),
    ("SubscribeToTask", {"id": "t"}),
    ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/h"}),
    ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "x"}),
    ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
    ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "x"}),
    ("GetExtendedAgentCard", {}),
]


async def test_every_method_needs_a_valid_key_and_the_admin_key_is_made_at_first_start(
    start_agent: StartAgent, home: Path
) -> None:
    server = start_agent("serve", "auth-1", **KEYED)
    admin_file = home / "admin.key"
    assert stat.S_IMODE(os.stat(admin_file).st_mode) == 0o600
    assert str(admin_file) in server.log()
    admin = secret(admin_file.read_text().strip())
    for method, params in CALLS:
        for key in (None, "a2a_000000000000_wrong", admin[:-2] + "xx"):
            reply = rpc(server.url, method, params, key)
            assert reply.status_code == 401, (method, key, reply.text)
            assert "Bearer" in reply.headers["www-authenticate"]
    for path in ("/v1/tasks", "/tasks", "/v1/tasks/t"):  # REST, too
        assert httpx.get(server.url + path, headers=A2A).status_code == 401
    # Public: the card (saying how to authenticate), health, the JWKS, the schemas.
    card = httpx.get(server.url + "/.well-known/agent-card.json").json()
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    for path in ("/healthz", "/.well-known/jwks.json", "/schemas/plan.v1.json"):
        assert httpx.get(server.url + path).status_code == 200
    # The admin key works, through the a2a-sdk client.
    async with a2a_client(server.url, key=admin) as client:
        task = await send(client, plan_message([item("a", "true", "true")]))
        assert (await wait_for(client, task.id)).status.state == TaskState.TASK_STATE_COMPLETED
    # A second start makes no second admin key.
    server.stop()
    start_agent("serve", "auth-1", **KEYED)
    assert admin_file.read_text().strip() == admin


async def test_another_principal_cannot_see_or_touch_a_task(start_agent: StartAgent) -> None:
    server = start_agent("serve", "auth-2", **KEYED)
    alice = make_key(server, "alice", "read", "submit", "approve", "run")
    bob = make_key(server, "bob", "read", "submit", "approve", "run")
    async with a2a_client(server.url, key=alice) as client:
        task = await send(client, plan_message([item("a", "sleep 30", "true")]))
        await wait_for(client, task.id, {TaskState.TASK_STATE_WORKING}, timeout=30)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("GetTask", {"id": task.id}),
        ("CancelTask", {"id": task.id}),
        ("SubscribeToTask", {"id": task.id}),
        ("CreateTaskPushNotificationConfig", {"taskId": task.id, "url": "https://e.com/h"}),
        ("GetTaskPushNotificationConfig", {"taskId": task.id, "id": "x"}),
        ("ListTaskPushNotificationConfigs", {"taskId": task.id}),
        ("DeleteTaskPushNotificationConfig", {"taskId": task.id, "id": "x"}),
        ("SendMessage", new_message(taskId=task.id)),  # a reply or a note to alice's task
    ]
    for method, params in calls:
        body = rpc(server.url, method, params, bob).text
        assert "TaskNotFound" in body or '"code":-32001' in body, (method, body)
    async with a2a_client(server.url, key=bob) as client:
        listed = await client.list_tasks(ListTasksRequest())
        assert [t.id for t in listed.tasks] == []
    async with a2a_client(server.url, key=alice) as client:
        mine = await client.get_task(GetTaskRequest(id=task.id))
        assert mine.status.state == TaskState.TASK_STATE_WORKING  # bob's cancel did nothing
        assert [t.id for t in (await client.list_tasks(ListTasksRequest())).tasks] == [task.id]


async def test_scopes_are_enforced_and_run_commands_need_the_run_scope(
    start_agent: StartAgent,
) -> None:
    server = start_agent("serve", "auth-3", **KEYED)
    default = make_key_by_cli(server, "carol")  # read, submit, approve
    reader = make_key(server, "dave", "read")
    async with a2a_client(server.url, key=default) as client:
        with pytest.raises(InvalidRequestError, match="lacks the 'run' scope"):
            await send(client, plan_message([item("a", "rm -rf /", "true")]))
        listed = await client.list_tasks(ListTasksRequest())
        assert list(listed.tasks) == []  # nothing was stored
    async with a2a_client(server.url, key=reader) as client:
        with pytest.raises(InvalidRequestError, match="lacks the 'submit' scope"):
            await send(client, plan_message([item("a", "true", "true")]))
        assert list((await client.list_tasks(ListTasksRequest())).tasks) == []
    listed_keys = subprocess.run(
        [sys.executable, "-m", "a2a_agent", "keys", "list"],
        env=server.env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "carol [approve read submit]" in listed_keys or "carol [read submit approve]" in (
        listed_keys
    )
    assert default not in listed_keys  # the secret is never shown again


async def test_a_revoked_key_stops_working(start_agent: StartAgent) -> None:
    server = start_agent("serve", "auth-4", **KEYED)
    key = make_key(server, "erin", "read")
    assert rpc(server.url, "ListTasks", {}, key).status_code == 200
    key_id = key.split("_")[1]
    subprocess.run(
        [sys.executable, "-m", "a2a_agent", "keys", "revoke", key_id],
        env=server.env,
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    deadline = time.monotonic() + 10  # each process trusts a verified key for 2 s
    while rpc(server.url, "ListTasks", {}, key).status_code != 401:
        assert time.monotonic() < deadline, "the revoked key still works"
        time.sleep(0.2)


def test_open_mode_is_refused_off_loopback_and_bad_hosts_and_types_are_refused(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    refused = AgentProcess(
        role="serve",
        database_url=database_url,
        home=home,
        executor_id="auth-open",
        extra_args=("--host", "0.0.0.0"),
        env={"A2A_AGENT_INSECURE_OPEN": "1"},
    )
    with pytest.raises(RuntimeError, match="A2A_AGENT_INSECURE_OPEN=1 turns authentication off"):
        refused.start()
    server = start_agent("serve", "auth-5", **KEYED)
    admin = (home / "admin.key").read_text().strip()
    evil = {**A2A, "Host": "attacker.example", "Authorization": f"Bearer {admin}"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    assert httpx.post(server.url + "/", json=body, headers=evil).status_code == 400
    form = httpx.post(
        server.url + "/",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}',
        headers={**A2A, "Authorization": f"Bearer {admin}", "Content-Type": "text/plain"},
    )
    refused_form = form.json()["error"]
    assert form.status_code == 415 and "application/json" in refused_form["message"]
    assert refused_form["code"] == -32005  # ContentTypeNotSupportedError, as JSON-RPC says
