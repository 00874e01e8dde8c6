"""An MCP task survives its server: kill -9 while the task's command runs, the server comes
back at the same address, and the MCP client's polling (tasks/get) finds the task finished,
with every item's command run once but the interrupted one, run again under the same key."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.clients.harness import Served
from tests.clients.test_mcp import RAW, GetTask, TaskIdParams, mcp_client
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_line
from tests.test_restart import assert_transitions_sound, ledger_items

pytestmark = [pytest.mark.slow, pytest.mark.processes]


async def poll_through_outage(served: Served, task_id: str, timeout: float = 90) -> list[str]:
    """tasks/get until the task ends, each poll on a fresh MCP client, as a client that keeps
    only its task handle does; a server that is down is polled again. The statuses seen."""
    statuses: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            async with mcp_client(served, tasks=True) as client:
                got = await client.session.send_request(
                    GetTask(params=TaskIdParams(task_id=task_id)), RAW
                )
        except Exception:  # noqa: BLE001  (the server is down: its connection was refused)
            statuses.append("unreachable")
        else:
            statuses.append(str(got["status"]))
            if got["status"] in ("completed", "failed", "cancelled"):
                return statuses
        await asyncio.sleep(0.3)
    raise AssertionError(f"task {task_id} did not end: {statuses[-5:]}")


async def test_an_mcp_task_finishes_after_its_server_is_killed(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "mcp-k")
    served = Served(server, admin_key="", key="")  # the test servers run without keys
    async with mcp_client(served, tasks=True) as client:
        plan = {"goal": "mcp crash", "items": ledger_items(3, ledger, 1.5)}
        created = await client.session.call_tool("delegate", {"plan": plan}, allow_claimed=True)
        task_id = created.task_id
        key = f"{task_id}:i1:1:run"
        wait_for_line(ledger, key)
    server.kill()
    server.start(wait=False)  # the same address: the client polls it while it comes up
    statuses = await poll_through_outage(served, task_id)
    server.wait_ready()
    async with mcp_client(served, tasks=True) as client:
        end = await client.session.send_request(GetTask(params=TaskIdParams(task_id=task_id)), RAW)
    assert statuses[0] == "unreachable" and statuses[-1] == "completed", statuses
    assert end["result"]["isError"] is False
    counts = Counter(ledger.read_text().split())
    assert counts[f"{task_id}:i0:1:run"] == 1 and counts[f"{task_id}:i2:1:run"] == 1
    assert counts[key] == 2  # the interrupted command ran again, under the same key
    assert_transitions_sound(database_url, task_id)
    # The same task over A2A, from the restarted server.
    got = httpx.post(
        f"{server.url}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}},
        headers={"A2A-Version": "1.0"},
    ).json()
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
