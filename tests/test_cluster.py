"""`a2a-agent cluster` (issue 16, part 4): N API processes and M workers on one machine and
one database, the deployment's shape without containers; Ctrl-C stops them all."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.processes import REPO, AgentProcess, free_port

pytestmark = pytest.mark.processes  # a whole local fleet of processes


def ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


async def test_a_local_cluster_shares_the_work_and_stops_together(
    database_url: str, home: Path
) -> None:
    port = free_port(2)
    env = AgentProcess(role="worker", database_url=database_url, home=home, executor_id="c").env
    del env["A2A_AGENT_EXECUTOR_ID"]  # the cluster names each process
    # Five processes at once (two APIs, two workers, a deliverer) beside three other test
    # processes' servers: the smallest pools keep the suite under PostgreSQL's 100 clients.
    env["A2A_AGENT_DB_POOL_MAX"] = "2"
    log = (home.parent / "cluster.log").open("wb")
    cluster = subprocess.Popen(
        [sys.executable, "-m", "a2a_agent", "cluster", "--api", "2", "--workers", "2",
         "--port", str(port)],
        env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    log.close()
    first, second = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port + 1}"
    try:
        deadline = time.monotonic() + 90
        while not (ready(first) and ready(second)):
            assert cluster.poll() is None, (home.parent / "cluster.log").read_text()
            assert time.monotonic() < deadline, "the cluster's APIs never became ready"
            time.sleep(0.3)
        async with a2a_client(first) as client:
            sent = [
                await send(client, plan_message([item(f"i{n}", "sleep 1", "true")]))
                for n in range(6)
            ]
        async with a2a_client(second) as client:  # any API answers for any task
            for task in sent:
                done = await wait_for(client, task.id, timeout=90)
                assert done.status.state == TaskState.TASK_STATE_COMPLETED
                assert (await client.get_task(GetTaskRequest(id=task.id))).id == task.id
        host = socket.gethostname()
        roles = dict(rows(database_url, "SELECT executor_id, role FROM workers"))
        assert {f"{host}-api-1", f"{host}-api-2", f"{host}-worker-1", f"{host}-worker-2"} <= set(
            roles
        ), roles
        # The API processes ran nothing: every run is the workers'.
        ran = {r for (r,) in rows(database_url, "SELECT DISTINCT executor_id FROM "
                                                "dbos.workflow_status")}  # fmt: skip
        assert ran and ran <= {f"{host}-worker-1", f"{host}-worker-2"}, ran
    finally:
        cluster.send_signal(signal.SIGINT)
        code = cluster.wait(timeout=60)
    assert code == 0
    assert not ready(first) and not ready(second)
    # Nothing of it is left running: no process of the session it started.
    leftover = subprocess.run(
        ["pgrep", "-s", str(cluster.pid)], capture_output=True, text=True, check=False
    )
    assert leftover.returncode == 1 and leftover.stdout == "", leftover
