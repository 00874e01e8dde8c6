"""What every client test shares: a keyed server per module, the drivers run in their own
environments, and the server's own record of what a client did (read with our a2a-sdk 1.x)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import CancelTaskRequest, ListTasksRequest, Task, TaskState

from tests.clients.venvs import VenvBuildError, ensure_node_modules
from tests.support.a2a import a2a_client, plan_of, wait_for
from tests.support.processes import REPO, AgentProcess
from tests.support.secrets import secret
from tests.test_auth import make_key

DRIVERS = Path(__file__).resolve().parent / "drivers"
CALLER_SCOPES = ("read", "submit", "approve", "run")  # `run`: plans carry run commands
# The keep-alive comment on a quiet stream (`A2A_AGENT_STREAM_PING_S`, 15 s by default),
# shortened with the clients' timeouts so the long-work tests take seconds, not minutes.
SSE_PING_S = 2.0
# The server as the client tests need it: keys on, webhooks to loopback allowed.
SERVER_ENV = {
    "A2A_AGENT_INSECURE_OPEN": "0",
    "A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1",
    "A2A_AGENT_STREAM_PING_S": str(SSE_PING_S),
}


@dataclass
class Served:
    """One keyed server of a test module and the keys its callers use."""

    process: AgentProcess
    admin_key: str
    key: str  # the caller's key: principal "client", scopes read submit approve run

    @property
    def url(self) -> str:
        return self.process.url


@contextmanager
def keyed_server(
    make_database: Callable[[str | None], str],
    template_db: str,
    home: Path,
    name: str,
    **env: str,
) -> Iterator[Served]:
    process = AgentProcess(
        role="serve",
        database_url=make_database(template_db),
        home=home,
        executor_id=f"clients-{name}",
        env={**SERVER_ENV, **env},
        # Another checkout's server (a commit under review) when the variable names one.
        code_dir=Path(os.environ.get("A2A_AGENT_CLIENTS_SERVER_CODE") or REPO),
    )
    try:
        process.start()
        admin = secret((home / "admin.key").read_text().strip())
        yield Served(process, admin, make_key(process, "client", *CALLER_SCOPES))
    finally:
        process.kill()


def tag() -> str:
    """A mark for one run's plans (in their goal), so the record can be found by it."""
    return uuid.uuid4().hex[:10]


@dataclass
class DriverRun:
    result: dict[str, Any]
    stderr: str
    seconds: float

    def scenario(self, name: str) -> dict[str, Any]:
        found = self.result.get(name)
        assert isinstance(found, dict), f"the driver did not report {name}: {self.result}"
        return found


@dataclass
class Driver:
    """A driver script running in its client's environment, and the file it reports into."""

    name: str
    process: subprocess.Popen[str]
    result_file: Path


def _result(driver: Driver, proc_out: str, stderr: str) -> dict[str, Any]:
    text = driver.result_file.read_text(encoding="utf-8") if driver.result_file.exists() else ""
    driver.result_file.unlink(missing_ok=True)
    if not text:
        raise AssertionError(
            f"{driver.name} exited {driver.process.returncode} without a result:\n"
            f"{proc_out[-3000:]}\n{stderr[-6000:]}"
        )
    parsed: dict[str, Any] = json.loads(text)
    return parsed


def driver_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(DRIVERS),  # driver_common.py, never this repository's packages
        "PYTHONWARNINGS": "ignore",
        # Frameworks that report home by default stay quiet (no network besides the server).
        "CREWAI_DISABLE_TELEMETRY": "true",
        "OTEL_SDK_DISABLED": "true",
        "ADK_DISABLE_TELEMETRY": "1",
        "DO_NOT_TRACK": "1",
    }


def start_driver(python: Path, driver: str, args: Mapping[str, Any]) -> Driver:
    handle, name = tempfile.mkstemp(prefix="driver-", suffix=".json")
    os.close(handle)
    result_file = Path(name)
    result_file.write_text("", encoding="utf-8")
    proc = subprocess.Popen(
        [str(python), str(DRIVERS / driver)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**driver_env(), "DRIVER_RESULT_FILE": str(result_file)},
        cwd=DRIVERS,
        start_new_session=True,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(dict(args)))
    proc.stdin.close()
    proc.stdin = None  # written and closed: communicate() must not flush it again
    return Driver(driver, proc, result_file)


def finish_driver(running: Driver, driver: str, started: float, timeout: float) -> DriverRun:
    proc = running.process
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        running.result_file.unlink(missing_ok=True)
        raise AssertionError(f"{driver} still running after {timeout} s:\n{err[-6000:]}") from None
    return DriverRun(_result(running, out, err), err, time.monotonic() - started)


def run_driver(
    python: Path, driver: str, args: Mapping[str, Any], *, timeout: float = 120
) -> DriverRun:
    """Run `driver` under `python` with `args` (JSON on stdin); the results it wrote."""
    started = time.monotonic()
    run = finish_driver(start_driver(python, driver, args), driver, started, timeout)
    times = {k: v.get("seconds") for k, v in run.result.items() if isinstance(v, dict)}
    print(f"{driver}: {run.seconds:.1f} s; scenarios {times}")  # shown with -rP or -s
    return run


def run_node_driver(
    package: str, script: str, served: Served, scenarios: dict[str, Any]
) -> dict[str, Any]:
    """Run a TypeScript client's driver (`drivers/<package>/<script>`, its npm packages
    installed once) against the served MCP door; its results, read from the file it writes.
    A failed install or a driver that fails fails the test, saying why."""
    try:
        where = ensure_node_modules(DRIVERS / package)
    except VenvBuildError as exc:
        pytest.fail(f"could not install {package}'s npm packages: {exc}", pytrace=False)
    result_file = where / f"result-{time.monotonic_ns()}.json"
    done = subprocess.run(
        ["node", str(where / script)],
        input=json.dumps({"url": f"{served.url}/mcp", "key": served.key, "scenarios": scenarios}),
        capture_output=True,
        text=True,
        cwd=where,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "DRIVER_RESULT_FILE": str(result_file)},
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    results: dict[str, Any] = json.loads(result_file.read_text())
    result_file.unlink()
    return results


async def record(served: Served, task_id: str, timeout: float = 60) -> Task:
    """The task as the server holds it, once it is terminal (the admin's view is not the
    owner's: every read is owner-scoped, so the caller's own key reads it)."""
    async with a2a_client(served.url, key=served.key) as client:
        return await wait_for(client, task_id, timeout=timeout)


async def record_now(served: Served, task_id: str) -> Task:
    async with a2a_client(served.url, key=served.key) as client:
        return await wait_for(client, task_id, states=set(TaskState.values()), timeout=10)


def items_done(task: Task) -> list[str]:
    return [i["id"] for i in plan_of(task)["items"] if i["status"] == "done"]


def workspace_commits(served: Served, task_id: str) -> list[str]:
    workspace = served.process.home / "workspaces" / task_id
    done = subprocess.run(
        ["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


async def cancel_when_seen(served: Served, goal_tag: str, timeout: float = 60) -> str:
    """As an operator would: find the caller's task whose planned goal holds `goal_tag` once
    it is working on its plan, and cancel it (for clients that cannot cancel). A text task
    not planned yet is left until it is, so its record always has a plan."""
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    async with a2a_client(served.url, key=served.key) as client:
        while time.monotonic() < deadline:
            listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
            for task in listed.tasks:
                seen[task.id] = (
                    f"{TaskState.Name(task.status.state)} "
                    f"{[a.artifact_id for a in task.artifacts]} {mentions(task, goal_tag)}"
                )
                if task.status.state != TaskState.TASK_STATE_WORKING:
                    continue
                if planned_with(task, goal_tag):
                    await client.cancel_task(CancelTaskRequest(id=task.id))
                    return str(task.id)
            await _sleep(0.2)
    raise AssertionError(f"no working task with {goal_tag} in its goal; seen {seen}")


async def _sleep(seconds: float) -> None:
    import asyncio  # noqa: PLC0415

    await asyncio.sleep(seconds)


def expect(problems: list[str], condition: object, what: str) -> None:
    if not condition:
        problems.append(what)


COMPLETED = TaskState.TASK_STATE_COMPLETED
CANCELED = TaskState.TASK_STATE_CANCELED
QUICK_ITEMS = ["one", "two"]
ASK_ITEMS = ["name", "use"]


async def check_record(
    served: Served,
    problems: list[str],
    label: str,
    task_id: object,
    *,
    state: int,
    items: list[str],
    timeout: float = 30,
) -> Task | None:
    """The server's record of a task a client drove: its state, the items done and their
    commits in the workspace. Adds what differs to `problems`."""
    if not isinstance(task_id, str) or not task_id:
        problems.append(f"{label}: the client reported no task id")
        return None
    try:
        task = await record(served, task_id, timeout)
    except TimeoutError as e:  # the client said it ended; the server says otherwise
        problems.append(f"{label}: {e}")
        return None
    expect(
        problems,
        task.status.state == state,
        f"{label}: the server holds {TaskState.Name(task.status.state)}, not "
        f"{TaskState.Name(state)}",
    )
    done = items_done(task)
    expect(problems, done == items, f"{label}: items done {done}, expected {items}")
    commits = workspace_commits(served, task_id)
    for item_id in items:
        expect(
            problems,
            any(c.startswith(f"Item {item_id}:") for c in commits),
            f"{label}: no commit for item {item_id} in {commits}",
        )
    return task


def no_error(problems: list[str], run: DriverRun, *names: str) -> None:
    for name in names:
        found = run.scenario(name)
        expect(
            problems, "error" not in found, f"{name}: {found.get('error')}\n{found.get('trace')}"
        )


def answer_written(served: Served, task_id: str) -> str:
    path = served.process.home / "workspaces" / task_id / "answers" / "name.md"
    return path.read_text() if path.exists() else ""


def verify_push_signature(served: Served, headers: Mapping[str, str], raw: bytes) -> str:
    """The ES256 JWT of a notification checked against the served JWKS (as docs/clients.md
    tells a receiver to); returns what was wrong, or "" when it verifies."""
    import hashlib  # noqa: PLC0415

    import httpx  # noqa: PLC0415
    import jwt  # noqa: PLC0415

    token = headers.get("x-a2a-notification-signature")
    if not token:
        return "no X-A2A-Notification-Signature header"
    jwks = httpx.get(f"{served.url}/.well-known/jwks.json", timeout=10).json()
    kid = jwt.get_unverified_header(token)["kid"]
    keys = [k for k in jwks["keys"] if k["kid"] == kid]
    if not keys:
        return f"kid {kid} not in the JWKS"
    try:
        claims = jwt.decode(
            token, key=jwt.PyJWK(keys[0]).key, algorithms=["ES256"], issuer=served.url
        )
    except jwt.InvalidTokenError as e:
        return f"JWT does not verify: {e}"
    if claims.get("body_sha256") != hashlib.sha256(raw).hexdigest():
        return "body_sha256 differs from the body received"
    return ""


def push_task_ids(body: Mapping[str, Any]) -> set[str]:
    """The task a notification is about, whatever its shape (1.0 StreamResponse or 0.3 Task)."""
    found: set[str] = set()
    if isinstance(body.get("id"), str) and body.get("kind") == "task":
        found.add(body["id"])
    for kind in ("task", "statusUpdate", "artifactUpdate"):
        event = body.get(kind)
        if isinstance(event, dict):
            found.add(str(event.get("id") or event.get("taskId")))
    return found


def push_shape(body: Mapping[str, Any]) -> str:
    if body.get("kind") in ("task", "status-update", "artifact-update"):
        return "0.3 " + str(body["kind"])
    keys = sorted(k for k in ("task", "statusUpdate", "artifactUpdate", "message") if k in body)
    return "1.0 StreamResponse " + ",".join(keys) if keys else "unknown " + ",".join(body)


async def tasks_tagged(served: Served, goal_tag: str) -> list[Task]:
    """The caller's tasks whose goal holds `goal_tag` (for clients that lose the task id)."""
    async with a2a_client(served.url, key=served.key) as client:
        listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
    return [t for t in listed.tasks if mentions(t, goal_tag)]


def planned_with(task: Task, goal_tag: str) -> bool:
    """Whether the task has its plan and the plan's goal holds the tag."""
    return any(a.artifact_id == "plan" for a in task.artifacts) and mentions(task, goal_tag)


def mentions(task: Task, goal_tag: str) -> bool:
    """Whether the task's plan goal, or before planning its first message, holds the tag."""
    try:
        return goal_tag in json.dumps(plan_of(task).get("goal", ""))
    except AssertionError:  # a text goal not planned yet: no plan artifact
        return goal_tag in str(task.history)


def verify_push_hmac(secret: str, headers: Mapping[str, str], raw: bytes) -> str:
    """Both HMAC-SHA256 forms of a notification, checked with the config's secret alone (as
    docs/clients.md tells a receiver to): Standard Webhooks (`webhook-id`,
    `webhook-timestamp`, `webhook-signature: v1,<base64>` over `<id>.<ts>.<body>`) and
    `X-A2A-Signature` (hex over `<ts>.<body>`) with `X-A2A-Signature-Timestamp`, each within
    5 minutes. Returns what was wrong, or "" when both verify."""
    import base64  # noqa: PLC0415
    import hashlib  # noqa: PLC0415
    import hmac  # noqa: PLC0415

    key = secret.encode()
    wid, wts = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    signed = hmac.new(key, f"{wid}.{wts}.".encode() + raw, hashlib.sha256).digest()
    offered = [s.split(",", 1)[1] for s in headers.get("webhook-signature", "").split() if "," in s]
    if not any(hmac.compare_digest(base64.b64encode(signed).decode(), s) for s in offered):
        return f"webhook-signature does not verify: {headers.get('webhook-signature')}"
    ts = headers.get("x-a2a-signature-timestamp", "")
    a2a = hmac.new(key, f"{ts}.".encode() + raw, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(a2a, headers.get("x-a2a-signature", "")):
        return "X-A2A-Signature does not verify"
    for stamp in (wts, ts):
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > 300:
            return f"timestamp {stamp!r} outside 5 minutes"
    return ""
