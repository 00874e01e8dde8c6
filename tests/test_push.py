"""Push notifications delivered from the event log, to a real receiver on loopback."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import jwt
import psycopg
import pytest
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError

from a2a_agent.delivery.signing import Signer
from persistence.db import Pool
from persistence.push import PostgresPushStore
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import REPO, StartAgent
from tests.support.receiver import Receiver, receiver
from tests.support.secrets import secret
from tests.support.waiting import wait_for_row

ALLOW = {"A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1", "A2A_AGENT_PUSH_BACKOFF_S": "0.2"}
COMPLETED = TaskState.TASK_STATE_COMPLETED


async def send_with_push(url: str, hook: str, items: list[dict[str, object]]) -> Task:
    request = SendMessageRequest(
        message=plan_message(items),
        configuration=SendMessageConfiguration(
            return_immediately=True,
            task_push_notification_config=TaskPushNotificationConfig(
                url=hook, token=secret("secret-token"), id="hook"
            ),
        ),
    )
    async with a2a_client(url) as client:
        async for response in client.send_message(request):
            return response.task
    raise AssertionError("no response")


def event_count(database_url: str, task_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT event_seq FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return int(row[0])


def assert_all_in_order(hook: Receiver, task_id: str, total: int) -> None:
    seen: dict[int, str] = {}
    for r in hook.accepted():
        seen.setdefault(r.seq, r.event_id)
        assert (
            r.body["statusUpdate" if "statusUpdate" in r.body else "artifactUpdate"]["metadata"][
                "eventId"
            ]
            == r.event_id
        )
    assert sorted(seen) == list(range(1, total + 1))
    firsts = []
    for r in hook.accepted():
        if r.seq not in firsts:
            firsts.append(r.seq)
    assert firsts == sorted(firsts)  # in order
    assert all(i.startswith(f"{task_id}:") for i in seen.values())


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:9/hook",
    ],
)
async def test_webhooks_to_private_addresses_are_refused_unless_allowed(
    start_agent: StartAgent, url: str
) -> None:
    closed = start_agent("serve", "push-ssrf")
    allowing = start_agent(
        "serve",
        "push-ssrf-2",
        A2A_AGENT_PUSH_ALLOW_HOSTS="127.0.0.1,localhost,10.0.0.0/8,169.254.169.254",
    )
    for server, refused in ((closed, True), (allowing, False)):
        async with a2a_client(server.url) as client:
            task = await send(client, plan_message([item("a", "true", "true")]))
            config = TaskPushNotificationConfig(task_id=task.id, url=url)
            if refused:
                with pytest.raises(InvalidParamsError, match="are refused unless"):
                    await client.create_task_push_notification_config(config)
            else:
                made = await client.create_task_push_notification_config(config)
                assert made.id and made.url == url


async def test_configs_are_kept_listed_and_deleted(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-crud", **ALLOW)
    with receiver() as hook:
        async with a2a_client(server.url) as client:
            task = await send(client, plan_message([item("a", "sleep 1", "true")]))
            config = TaskPushNotificationConfig(
                task_id=task.id, id="mine", url=hook.url, token=secret("tok-5150")
            )
            config.authentication.scheme = "Bearer"
            config.authentication.credentials = secret("cred-5150")
            made = await client.create_task_push_notification_config(config)
            assert (made.id, made.token) == ("mine", "tok-5150")
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
            )
            # Read back, the secrets are not shown; at rest they are sealed.
            assert got.url == hook.url and got.token == "" and got.authentication.credentials == ""
            assert got.authentication.scheme == "Bearer"
            with psycopg.connect(database_url) as conn:
                stored = conn.execute(
                    "SELECT token, authentication::text FROM push_configs WHERE id = 'mine'"
                ).fetchone()
            assert stored is not None and stored[0].startswith("fernet:")
            assert "tok-5150" not in str(stored) and "cred-5150" not in str(stored)
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            assert [c.id for c in listed.configs] == ["mine"]
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
            )
            with pytest.raises(InvalidParamsError, match="no push config 'mine'"):
                await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=task.id, id="mine")
                )


async def test_every_event_is_pushed_in_order_with_its_id_and_token(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-1", **ALLOW)
    with receiver() as hook:
        task = await send_with_push(
            server.url, hook.url, [item("a", "true", "true"), item("b", "true", "true")]
        )
        async with a2a_client(server.url) as client:
            done = await wait_for(client, task.id, timeout=30)
        assert done.status.state == COMPLETED
        total = event_count(database_url, task.id)
        hook.wait_for(lambda: len(hook.accepted()) >= total)
        assert_all_in_order(hook, task.id, total)
        assert len(hook.accepted()) == total  # a healthy receiver gets each event once
        assert {r.headers["x-a2a-notification-token"] for r in hook.received} == {"secret-token"}
        last = hook.accepted()[-1].body
        assert last["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_receiver_down_then_up_gets_everything_and_a_dead_one_is_retried(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-2", A2A_AGENT_PUSH_MAX_ATTEMPTS="4", **ALLOW)
    with receiver() as hook:
        hook.statuses = [500, 500, 503]  # down for three tries, then up
        task = await send_with_push(server.url, hook.url, [item("a", "true", "true")])
        async with a2a_client(server.url) as client:
            await wait_for(client, task.id, timeout=30)
        total = event_count(database_url, task.id)
        hook.wait_for(lambda: len(hook.accepted()) >= total)
        assert_all_in_order(hook, task.id, total)
        assert [r.status for r in hook.received[:4]] == [500, 500, 503, 200]
        assert hook.received[0].event_id == hook.received[3].event_id  # the same event again

    with receiver() as dead:
        dead.otherwise = 500  # never up
        task = await send_with_push(server.url, dead.url, [item("a", "true", "true")])
        dead.wait_for(lambda: len(dead.received) >= 4)
        listed = subprocess.run(
            [sys.executable, "-m", "a2a_agent", "push", "dead"],
            env={**server.env},
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert task.id in listed and "HTTP 500" in listed and "attempts=4" in listed
        assert len(dead.received) == 4  # dead: no more tries
        dead.otherwise = 200
        retried = subprocess.run(
            [sys.executable, "-m", "a2a_agent", "push", "retry", task.id],
            env={**server.env},
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "retrying 1 push config(s): hook" in retried
        total = event_count(database_url, task.id)
        dead.wait_for(lambda: len({r.seq for r in dead.accepted()}) >= total)
        assert_all_in_order(dead, task.id, total)


@pytest.mark.processes
@pytest.mark.slow
async def test_pushes_not_sent_before_a_kill_9_go_out_after_the_restart(
    start_agent: StartAgent, database_url: str
) -> None:
    with receiver() as hook:
        hook.otherwise = 500  # the receiver is down while the run commits its events
        server = start_agent("serve", "push-k", A2A_AGENT_PUSH_MAX_ATTEMPTS="50", **ALLOW)
        task = await send_with_push(server.url, hook.url, [item("a", "true", "true")])
        async with a2a_client(server.url) as client:
            await wait_for(client, task.id, timeout=30)
        server.kill()
        hook.otherwise = 200
        start_agent("serve", "push-k", A2A_AGENT_PUSH_MAX_ATTEMPTS="50", **ALLOW)
        total = event_count(database_url, task.id)
        hook.wait_for(lambda: len({r.seq for r in hook.accepted()}) >= total, timeout=60)
        assert_all_in_order(hook, task.id, total)


async def test_a_notification_is_signed_and_verifies_with_the_served_jwks(
    start_agent: StartAgent,
) -> None:
    server = start_agent("serve", "push-jwt", **ALLOW)
    with receiver() as hook:
        task = await send_with_push(server.url, hook.url, [item("a", "true", "true")])
        hook.wait_for(lambda: len(hook.accepted()) >= 1)
    jwks = httpx.get(f"{server.url}/.well-known/jwks.json").json()
    (jwk,) = jwks["keys"]
    first = hook.accepted()[0]
    token = first.headers["x-a2a-notification-signature"]
    assert jwt.get_unverified_header(token)["kid"] == jwk["kid"]
    key = jwt.PyJWK(jwk).key
    claims = jwt.decode(token, key=key, algorithms=["ES256"], issuer=server.url)
    assert claims["jti"] == first.event_id and claims["jti"].startswith(task.id)
    assert claims["body_sha256"] == hashlib.sha256(first.raw).hexdigest()
    altered = first.raw.replace(b"taskId", b"taskID")
    assert altered != first.raw
    assert claims["body_sha256"] != hashlib.sha256(altered).hexdigest()  # the body was changed
    head, payload, signature = token.split(".")
    forged = json.loads(base64.urlsafe_b64decode(payload + "=="))
    forged["body_sha256"] = hashlib.sha256(altered).hexdigest()
    forged_payload = base64.urlsafe_b64encode(json.dumps(forged).encode()).rstrip(b"=").decode()
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(f"{head}.{forged_payload}.{signature}", key=key, algorithms=["ES256"])
    # Every process on the database signs with the same key.
    other = start_agent("serve", "push-jwt-2", **ALLOW)
    assert httpx.get(f"{other.url}/.well-known/jwks.json").json() == jwks


async def test_a_slow_receiver_delays_only_its_own_notifications(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-slow", A2A_AGENT_PUSH_TIMEOUT_S="30", **ALLOW)
    with receiver() as slow, receiver() as quick:
        slow.delay_s = 5.0
        items = [item("a", "true", "true"), item("b", "true", "true")]
        slowed = await send_with_push(server.url, slow.url, items)
        other = await send_with_push(server.url, quick.url, items)
        async with a2a_client(server.url) as client:
            first = await wait_for(client, slowed.id, timeout=30)
            second = await wait_for(client, other.id, timeout=30)
        assert first.status.state == second.status.state == COMPLETED
        total = event_count(database_url, other.id)
        quick.wait_for(lambda: len(quick.accepted()) >= total)
        # Both runs ended and the other receiver has everything while the slow one is
        # still on its first notifications: it held up no run and no other receiver.
        assert len(slow.received) <= 2
        assert_all_in_order(quick, other.id, total)


async def test_delivered_configs_of_ended_tasks_are_pruned_and_dead_ones_kept(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent(
        "serve",
        "push-prune",
        A2A_AGENT_PUSH_RETENTION_S="1",
        A2A_AGENT_PUSH_MAX_ATTEMPTS="1",
        **ALLOW,
    )
    with receiver() as good, receiver() as bad:
        bad.otherwise = 500
        delivered = await send_with_push(server.url, good.url, [item("a", "true", "true")])
        failing = await send_with_push(server.url, bad.url, [item("a", "true", "true")])
        async with a2a_client(server.url) as client:
            await wait_for(client, delivered.id, timeout=30)
            await wait_for(client, failing.id, timeout=30)
        total = event_count(database_url, delivered.id)
        good.wait_for(lambda: len(good.accepted()) >= total)
        wait_for_row(
            database_url,
            "SELECT count(*) = 0 FROM push_configs WHERE task_id = %s",
            (delivered.id,),
            what="the delivered config pruned",
        )
    with psycopg.connect(database_url) as conn:
        dead = conn.execute(
            "SELECT state FROM push_configs WHERE task_id = %s", (failing.id,)
        ).fetchall()
        events = conn.execute(
            "SELECT count(*) FROM events WHERE task_id = %s", (delivered.id,)
        ).fetchone()
    assert dead == [("dead",)]  # kept for an operator
    assert events == (total,)  # the task's events stay as long as the task


@pytest.mark.processes
@pytest.mark.slow
async def test_the_deliverer_is_a_process_of_its_own_replaced_when_killed(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-p", **ALLOW)
    found = re.search(r"deliverer push-p running \(pid (\d+)\)", server.log())
    deadline = time.monotonic() + 30
    while found is None and time.monotonic() < deadline:
        time.sleep(0.1)
        found = re.search(r"deliverer push-p running \(pid (\d+)\)", server.log())
    assert found is not None, server.log()
    os.kill(int(found.group(1)), signal.SIGKILL)
    with receiver() as hook:
        task = await send_with_push(server.url, hook.url, [item("a", "true", "true")])
        total = event_count(database_url, task.id)
        async with a2a_client(server.url) as client:
            assert (await wait_for(client, task.id, timeout=30)).status.state == COMPLETED
        total = event_count(database_url, task.id)
        hook.wait_for(lambda: len({r.seq for r in hook.accepted()}) >= total, timeout=30)
        assert_all_in_order(hook, task.id, total)
    assert "was killed by signal 9; starting a new one" in server.log()
    assert len(re.findall(r"deliverer push-p running", server.log())) == 2


async def test_with_delivery_off_a_separate_deliver_process_sends_the_pushes(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-o", A2A_AGENT_PUSH_DELIVERY="off", **ALLOW)
    with receiver() as hook:
        task = await send_with_push(server.url, hook.url, [item("a", "true", "true")])
        async with a2a_client(server.url) as client:
            assert (await wait_for(client, task.id, timeout=30)).status.state == COMPLETED
        assert "deliverer push-o running" not in server.log()
        assert hook.received == []  # nobody here delivers
        start_agent("deliver", "push-d", **ALLOW)
        total = event_count(database_url, task.id)
        hook.wait_for(lambda: len({r.seq for r in hook.accepted()}) >= total, timeout=30)
        assert_all_in_order(hook, task.id, total)


async def test_processes_starting_together_make_one_signing_key(pool: Pool) -> None:
    # A worker's service and its deliverer start at once: both must sign with one key.
    store = PostgresPushStore(pool)
    signers = [Signer("http://127.0.0.1") for _ in range(4)]
    await asyncio.gather(*(s.load(store) for s in signers))
    assert len({s.jwks()["keys"][0]["kid"] for s in signers}) == 1
    assert all(len(s.jwks()["keys"]) == 1 for s in signers)
    assert len(await store.signing_keys()) == 1


def test_push_dead_on_a_database_never_served_lists_nothing(
    make_database: Callable[[str | None], str], tmp_path: Path
) -> None:
    """A fresh database (the embedded default, before any `serve`) has no tables yet: the
    command said "a database operation failed; see the server log", and there is no server
    log for it. It migrates first, as `keys` does."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DATABASE_URL": make_database(None),
        "A2A_AGENT_HOME": str(tmp_path / "home"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "a2a_agent", "push", "dead"],
        env=env, cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == "", (done.returncode, done.stderr[-500:])
