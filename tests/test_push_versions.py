"""Push per protocol version: a config made by a 0.3 client gets 0.3's body (the Task as of
each event), one made by a 1.0 client the StreamResponse, from the same outbox; per-config
HMAC signatures in both header forms; an idempotent delete. Real server processes, real
receivers on loopback, real PostgreSQL."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import signal
import time
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.conversions import to_compat_message
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    StreamResponse,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from google.protobuf.json_format import ParseDict

from a2a_agent.delivery.signing import hmac_headers
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import AgentProcess, StartAgent
from tests.support.receiver import Receiver, receiver
from tests.support.secrets import secret

ALLOW = {"A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1", "A2A_AGENT_PUSH_BACKOFF_S": "0.1"}
COMPLETED = TaskState.TASK_STATE_COMPLETED
SECRET_03 = secret("hmac-secret-of-the-03-receiver-5150")
SECRET_10 = secret("hmac-secret-of-the-10-receiver-8086")
PLAN = [item("a", "sleep 1", "true"), item("b", "true", "true")]


# ---- an independent verifier (the receiver's side, not the service's code) -------------------


def standard_webhook_ok(secret_: str, headers: dict[str, str], raw: bytes) -> bool:
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + raw
    mac = hmac.new(secret_.encode(), signed, hashlib.sha256).digest()
    wanted = base64.b64encode(mac).decode()
    given = [
        s.split(",", 1)[1] for s in headers["webhook-signature"].split() if s.startswith("v1,")
    ]
    fresh = abs(time.time() - int(headers["webhook-timestamp"])) < 300
    return fresh and any(hmac.compare_digest(wanted, g) for g in given)


def x_a2a_signature_ok(secret_: str, headers: dict[str, str], raw: bytes) -> bool:
    stamp = headers["x-a2a-signature-timestamp"]
    mac = hmac.new(secret_.encode(), stamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    fresh = abs(time.time() - int(stamp)) < 300
    return fresh and hmac.compare_digest(mac, headers["x-a2a-signature"])


# ---- a 0.3 client: JSON-RPC without an A2A-Version header ------------------------------------


def rpc03(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
    answer: dict[str, Any] = httpx.post(f"{url}/", json=body, timeout=30).json()
    assert "error" not in answer, answer
    return answer


def config03(hook: str, config_id: str, secret_: str) -> v03.PushNotificationConfig:
    return v03.PushNotificationConfig(
        id=config_id,
        url=hook,
        token=secret(f"token-{config_id}-{uuid.uuid4().hex[:8]}"),
        authentication=v03.PushNotificationAuthenticationInfo(
            schemes=["HMAC-SHA256"], credentials=secret_
        ),
    )


def dumped(model: Any) -> dict[str, Any]:
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def send03(url: str, hook: str) -> str:
    """A task sent by a 0.3 client with its push config inline; its id."""
    params = v03.MessageSendParams(
        message=to_compat_message(plan_message(PLAN)),
        configuration=v03.MessageSendConfiguration(
            blocking=False, push_notification_config=config03(hook, "p03", SECRET_03)
        ),
    )
    task = v03.Task.model_validate(rpc03(url, "message/send", dumped(params))["result"])
    return task.id


def set03(url: str, task_id: str, hook: str) -> None:
    params = v03.TaskPushNotificationConfig(
        task_id=task_id, push_notification_config=config03(hook, "p03", SECRET_03)
    )
    rpc03(url, "tasks/pushNotificationConfig/set", dumped(params))


def config10(task_id: str, hook: str) -> TaskPushNotificationConfig:
    config = TaskPushNotificationConfig(task_id=task_id, id="p10", url=hook)
    config.authentication.scheme = "hmac_sha256"  # CrewAI's spelling of the mode
    config.authentication.credentials = SECRET_10
    return config


# ---- what each receiver must have got --------------------------------------------------------


def stored_events(database_url: str, task_id: str) -> list[tuple[int, dict[str, Any]]]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT seq, body FROM task_events(%s, 0, NULL)", (task_id,)).fetchall()
    return [(int(seq), body) for seq, body in rows]


def event_seq(database_url: str, task_id: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT event_seq FROM tasks WHERE id = %s", (task_id,)).fetchone()
    assert row is not None
    return int(row[0])


def once_in_order(hook: Receiver, first: int, total: int) -> list[Any]:
    """The accepted notifications: each event from `first` to `total` once, in order."""
    got = hook.accepted()
    assert [r.seq for r in got] == list(range(first, total + 1)), [r.seq for r in got]
    return got


def as_of(events: list[tuple[int, dict[str, Any]]], seq: int) -> tuple[str, list[str]]:
    """The task's state and artifact ids after event `seq`, from the event log itself."""
    state, artifacts = "submitted", []
    for n, body in events:
        if n > seq:
            break
        if body["kind"] == "status":
            state = body["state"]
        elif body.get("data") is not None and body["name"] not in artifacts:
            artifacts.append(body["name"])
    return state.replace("_", "-"), artifacts


def check_03(hook: Receiver, events: list[tuple[int, dict[str, Any]]], first: int = 1) -> None:
    """Every event once, in order, each as the 0.3 Task as of that event."""
    for r in once_in_order(hook, first, events[-1][0]):
        task = v03.Task.model_validate(r.body)  # 0.3's shape: kind "task", parts with kind
        assert r.body["kind"] == "task" and task.metadata is not None
        assert task.metadata["eventId"] == r.event_id
        state, artifacts = as_of(events, r.seq)
        assert task.status.state.value == state, (r.seq, task.status.state, state)
        assert [a.artifact_id for a in task.artifacts or []] == artifacts
    last = v03.Task.model_validate(hook.accepted()[-1].body)
    assert last.status.state == v03.TaskState.completed
    report = next(a for a in last.artifacts or [] if a.artifact_id == "report")
    assert {p.root.kind for p in report.parts} >= {"text", "data"}


def check_10(hook: Receiver, first: int, total: int) -> None:
    """Every event once, in order, each as a 1.0 StreamResponse."""
    for r in once_in_order(hook, first, total):
        response = ParseDict(r.body, StreamResponse())
        event = response.status_update if response.HasField("status_update") else None
        event = event or response.artifact_update
        assert event.task_id and event.metadata["eventId"] == r.event_id
    last = ParseDict(hook.accepted()[-1].body, StreamResponse())
    assert last.status_update.status.state == COMPLETED


# ---- the tests ---------------------------------------------------------------------------------


def test_the_standard_webhooks_form_matches_the_specifications_example() -> None:
    # The example of the Standard Webhooks specification (a `whsec_` secret is base64).
    headers = hmac_headers(
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "msg_p5jXN8AQM9LWM0D4loKWxJek",
        b'{"test": 2432232314}',
        1614265330,
    )
    assert headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    assert headers["webhook-timestamp"] == headers["X-A2A-Signature-Timestamp"] == "1614265330"


async def test_each_version_gets_its_own_shape_signed_and_a_delete_is_idempotent(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-v", **ALLOW)
    with receiver() as hook03, receiver() as hook10:
        task_id = send03(server.url, hook03.url)  # a 0.3 client, its config inline
        async with a2a_client(server.url) as client:
            before = event_seq(database_url, task_id)
            made = await client.create_task_push_notification_config(config10(task_id, hook10.url))
            after = event_seq(database_url, task_id)
            assert made.authentication.scheme == "HMAC-SHA256"
            assert (await wait_for(client, task_id, timeout=30)).status.state == COMPLETED
            total = event_seq(database_url, task_id)
            hook03.wait_for(lambda: len(hook03.accepted()) >= total)
            first10 = hook10.accepted()[0].seq if hook10.accepted() else total
            hook10.wait_for(lambda: len(hook10.accepted()) >= total - first10 + 1)

            events = stored_events(database_url, task_id)
            check_03(hook03, events)
            assert before < first10 <= after + 1  # the 1.0 config: every event after it
            check_10(hook10, first10, total)
            assert len(hook03.received) == total  # healthy: nothing sent twice

            # Signed per config, both header forms; a wrong secret does not verify.
            pairs = ((hook03, SECRET_03, SECRET_10), (hook10, SECRET_10, SECRET_03))
            for hook, right, wrong in pairs:
                for r in hook.received:
                    assert r.headers["webhook-id"] == r.event_id
                    assert r.headers["webhook-timestamp"] == r.headers["x-a2a-signature-timestamp"]
                    assert standard_webhook_ok(right, r.headers, r.raw)
                    assert x_a2a_signature_ok(right, r.headers, r.raw)
                    assert not standard_webhook_ok(wrong, r.headers, r.raw)
                    assert not x_a2a_signature_ok(wrong, r.headers, r.raw)
                    assert not x_a2a_signature_ok(right, r.headers, r.raw + b" ")
                    assert "authorization" not in r.headers  # the secret is never sent
                    assert "x-a2a-notification-signature" in r.headers  # the JWT as before

            # At rest the secret is sealed; a read shows the scheme, never the secret.
            with psycopg.connect(database_url) as conn:
                stored = conn.execute(
                    "SELECT id, protocol, authentication::text FROM push_configs "
                    "WHERE task_id = %s ORDER BY id",
                    (task_id,),
                ).fetchall()
            assert [(i, p) for i, p, _ in stored] == [("p03", "0.3"), ("p10", "1.0")]
            assert all("fernet:" in a and SECRET_03 not in a and SECRET_10 not in a
                       for _, _, a in stored)  # fmt: skip
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="p03")
            )
            assert got.authentication.scheme == "HMAC-SHA256"
            assert got.authentication.credentials == "" and got.token == ""
            listed = rpc03(server.url, "tasks/pushNotificationConfig/list", {"id": task_id})[
                "result"
            ]
            assert SECRET_03 not in str(listed) and SECRET_10 not in str(listed)

            # A secret too short to sign with is refused when the config is made.
            short = config10(task_id, hook10.url)
            short.authentication.credentials = "short"
            with pytest.raises(InvalidParamsError, match="at least 16 bytes"):
                await client.create_task_push_notification_config(short)

            # Delete is idempotent on a task of the caller's; an unknown task is not found.
            for _ in range(2):
                await client.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="p10")
                )
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="never-made")
            )
            for _ in range(2):
                rpc03(
                    server.url,
                    "tasks/pushNotificationConfig/delete",
                    {"id": task_id, "pushNotificationConfigId": "p03"},
                )
            with pytest.raises(TaskNotFoundError):
                await client.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=str(uuid.uuid4()), id="p10")
                )
            with psycopg.connect(database_url) as conn:
                left = conn.execute(
                    "SELECT count(*) FROM push_configs WHERE task_id = %s", (task_id,)
                ).fetchone()
            assert left == (0,)


def deliverer_pid(server: AgentProcess, after: int = 0) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.findall(rf"deliverer {server.executor_id} running \(pid (\d+)\)", server.log())
        if len(found) > after:
            return int(found[after])
        time.sleep(0.1)
    raise TimeoutError(server.log())


@pytest.mark.processes
@pytest.mark.slow
async def test_a_kill_9_of_the_deliverer_between_commit_and_push_loses_none_for_either(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "push-vk", A2A_AGENT_PUSH_MAX_ATTEMPTS="100", **ALLOW)
    with receiver() as hook03, receiver() as hook10:
        hook03.otherwise = hook10.otherwise = 500  # down while the run commits its events
        async with a2a_client(server.url) as client:
            task = await send(client, plan_message(PLAN))
            from10 = event_seq(database_url, task.id)
            await client.create_task_push_notification_config(config10(task.id, hook10.url))
            from03 = event_seq(database_url, task.id)
            set03(server.url, task.id, hook03.url)  # a 0.3 client's config, made by `set`
            upto03 = event_seq(database_url, task.id)
            assert (await wait_for(client, task.id, timeout=30)).status.state == COMPLETED
        total = event_seq(database_url, task.id)
        assert from03 > 0 and upto03 < total  # the 0.3 config starts from the task so far
        # Every event committed, none taken: both receivers have only been refusing.
        hook03.wait_for(lambda: len(hook03.received) >= 1)
        hook10.wait_for(lambda: len(hook10.received) >= 1)
        assert hook03.accepted() == hook10.accepted() == []
        os.kill(deliverer_pid(server), signal.SIGKILL)
        hook03.otherwise = hook10.otherwise = 200
        deliverer_pid(server, after=1)  # the nanny started another
        hook03.wait_for(lambda: bool(hook03.accepted()) and hook03.accepted()[-1].seq == total)
        hook10.wait_for(lambda: bool(hook10.accepted()) and hook10.accepted()[-1].seq == total)
        first03, first10 = hook03.accepted()[0].seq, hook10.accepted()[0].seq
        assert from03 < first03 <= upto03 + 1 and from10 < first10 <= from03 + 1
        check_03(hook03, stored_events(database_url, task.id), first03)
        check_10(hook10, first10, total)
    assert "was killed by signal 9; starting a new one" in server.log()
