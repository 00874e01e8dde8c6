"""What long polls cost and how soon they answer (issue 26): N GetTasks waiting at once on an
API process, each naming its task's current generation, then the tasks moved on one by one.

    .venv/bin/python bench/long_poll.py [--polls 1000] [--moved 50] [--database-url URL]

Starts one `a2a-agent serve --no-worker` (the API alone: submitted tasks stay as they are) on a
fresh database, submits `--polls` tasks and sends one long poll for each. Prints the serving
process's RSS and the database's connections before the polls and while they all wait, then
cancels `--moved` tasks one at a time and prints how long after each cancel's event row was
written its poll answered (the event's `at`, taken before its commit, against the time the
answer reached the client: both on this host's clock). Asserts nothing.

Target (issue 26): an answer within 50 ms of the event; 1,000 waiting polls cost the API
process at most 50 MB and no database connection each.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# A benchmark measures the server as deployed: exec'd, not forked from the test suite's
# zygote (whose memory it would share, and whose PATH its git lookup would keep).
os.environ["A2A_TEST_EXEC"] = "1"
from bench.databases import bench_database
from tests.support.processes import AgentProcess

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
V10 = {"A2A-Version": "1.0"}


def serving_pid(nanny: int) -> int:
    """The serving child of `serve`'s nanny (the process that answers)."""
    children = Path(f"/proc/{nanny}/task/{nanny}/children").read_text().split()
    return int(children[0]) if children else nanny


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def connections(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid()"
        ).fetchone()
    return int(row[0]) if row else 0


def event_at(url: str, task_id: str, seq: int) -> datetime:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT at FROM events WHERE task_id = %s AND seq > %s ORDER BY seq LIMIT 1",
            (task_id, seq),
        ).fetchone()
    assert row is not None
    return row[0]  # type: ignore[no-any-return]


async def rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post("/", json=body, headers=V10)
    return response.json()["result"]


async def submit(http: httpx.AsyncClient) -> tuple[str, int]:
    plan = {"goal": "wait", "items": [{"id": "a", "title": "a", "run": "true", "verify": "true"}]}
    message = {
        "role": "ROLE_USER",
        "messageId": str(uuid.uuid4()),
        "parts": [{"data": {"plan": plan}}],
    }
    task = (
        await rpc(
            http, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}
        )
    )["task"]
    return str(task["id"]), int(task["metadata"]["generation"])


async def run(url: str, server: AgentProcess, polls: int, moved: int) -> None:
    limits = httpx.Limits(max_connections=polls + 50, max_keepalive_connections=polls + 50)
    timeout = httpx.Timeout(120.0)
    # Cancels on connections of their own: a poll's connection, idle in the pool past the
    # server's keep-alive (5 s), may be closed under a request that reuses it.
    control = httpx.AsyncClient(
        base_url=server.url, limits=httpx.Limits(max_keepalive_connections=0), timeout=timeout
    )
    async with (
        control,
        httpx.AsyncClient(base_url=server.url, limits=limits, timeout=timeout) as http,
    ):
        gate = asyncio.Semaphore(20)

        async def one() -> tuple[str, int]:
            async with gate:
                return await submit(http)

        tasks = await asyncio.gather(*[one() for _ in range(polls)])
        assert server.proc is not None
        pid = serving_pid(server.proc.pid)
        await asyncio.sleep(1)
        idle_rss, idle_conns = rss_mb(pid), connections(url)
        answered: dict[str, float] = {}

        async def poll(task_id: str, generation: int) -> None:
            asked = {"id": task_id, "currentGeneration": generation, "timeoutMs": 30_000}
            await rpc(http, "GetTask", asked)
            answered[task_id] = time.time()

        started = time.monotonic()
        waiting = [asyncio.ensure_future(poll(t, g)) for t, g in tasks]
        await asyncio.sleep(min(8.0, 2 + polls / 250))  # every poll sent and waiting
        early = len(answered)
        busy_rss, busy_conns = rss_mb(pid), connections(url)
        lags = []
        for task_id, generation in tasks[:moved]:
            await rpc(control, "CancelTask", {"id": task_id})
            while task_id not in answered:
                await asyncio.sleep(0.002)
            lags.append(answered[task_id] - event_at(url, task_id, generation).timestamp())
        within = time.monotonic() - started
        for task_id, _ in tasks[moved:]:
            await rpc(control, "CancelTask", {"id": task_id})
        await asyncio.gather(*waiting)
    print(f"{polls} long polls (one per task) on one API process; {moved} tasks moved on")
    print(f"  answered before any task moved (should be 0): {early}")
    print(f"  serving process RSS: {idle_rss:.1f} MB before, {busy_rss:.1f} MB with all waiting"
          f" (+{busy_rss - idle_rss:.1f} MB, {1024 * (busy_rss - idle_rss) / polls:.1f} KB"
          " a poll)")  # fmt: skip
    print(f"  database connections: {idle_conns} before, {busy_conns} with all waiting")
    ordered = sorted(lags)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"  event row written > poll answered: median {1000 * statistics.median(ordered):.1f} ms,"
        f" p95 {1000 * p95:.1f} ms, max {1000 * ordered[-1]:.1f} ms (n={len(ordered)},"
        f" {within:.1f} s after the polls were sent)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_SERVER, help="server (admin) URL")
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--moved", type=int, default=50)
    args = parser.parse_args()
    with bench_database(args.database_url, "a2a_bench_poll") as url:
        home = Path(tempfile.mkdtemp(prefix="a2a-poll-"))
        server = AgentProcess(
            role="serve",
            database_url=url,
            home=home,
            executor_id="poll-bench",
            extra_args=("--no-worker",),
            env={"A2A_AGENT_MAX_ACTIVE_TASKS": "0"},
        ).start()
        try:
            asyncio.run(run(url, server, args.polls, args.moved))
        finally:
            server.kill()


if __name__ == "__main__":
    main()
