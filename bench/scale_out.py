"""Scale-out: completed steps per second with 1, 2 and 4 worker processes on one database.

Each run starts `a2a-agent cluster --api 1 --workers M` (real processes on this machine, one
PostgreSQL), submits the same workload over A2A (`--tasks` tasks of `--items` items whose
`run` sleeps `--sleep` seconds, so the two cores are not what limits), and measures from the
first submission to the last task's completion: item steps per second, and every recorded
step (effects) per second. DBOS's queue hands the runs to the workers; each takes
`--concurrency` at once. Prints its figures and the command; asserts nothing.

    .venv/bin/python bench/scale_out.py                       # ~2 minutes
    .venv/bin/python bench/scale_out.py --workers 1 2 4 --tasks 24 --items 3 --sleep 1

Targets (issue 16): >= 1.8x the one-worker rate at 2 workers, >= 3.4x at 4.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=60).json()
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return dict(reply["result"])


def sleepy_plan(n: int, items: int, sleep: float) -> dict[str, Any]:
    plan = {
        "goal": f"scale task {n}",
        "items": [
            {"id": f"i{k}", "run": f"sleep {sleep}", "verify": "true", "precheck": False}
            for k in range(items)
        ],
    }
    return {
        "configuration": {"returnImmediately": True},
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"plan": plan}}],
        },
    }


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("the cluster exited early")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        time.sleep(0.2)
    raise TimeoutError("the cluster never became ready")


def measure(args: argparse.Namespace, database: str, workers: int, port: int) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix=f"a2a-scale-{workers}-"))
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "A2A_AGENT_HOME": str(home),
        "A2A_AGENT_INSECURE_OPEN": "1",
        "A2A_AGENT_WORKER_CONCURRENCY": str(args.concurrency),
        "A2A_AGENT_QUEUE_POLL_S": "0.1",
        "A2A_AGENT_BUDGET_PAUSE": "off",
        "PYTHONPATH": str(REPO),
    }
    cluster = subprocess.Popen(
        [sys.executable, "-m", "a2a_agent", "cluster", "--api", "1",
         "--workers", str(workers), "--port", str(port)],
        env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, cluster)
        time.sleep(3)  # every worker registered and polling
        started = time.monotonic()
        ids = [
            rpc(url, "SendMessage", sleepy_plan(n, args.items, args.sleep))["task"]["id"]
            for n in range(args.tasks)
        ]
        with psycopg.connect(database, autocommit=True) as conn:
            while True:
                (left,) = conn.execute(
                    "SELECT count(*) FROM tasks WHERE id = ANY(%s) AND state <> 'completed'",
                    (ids,),
                ).fetchone() or (0,)
                if not left:
                    break
                if time.monotonic() - started > args.timeout:
                    raise TimeoutError(f"{left} task(s) unfinished")
                time.sleep(0.05)
            took = time.monotonic() - started
            (steps,) = conn.execute(
                "SELECT count(*) FROM effects WHERE task_id = ANY(%s) AND status = 'completed'",
                (ids,),
            ).fetchone() or (0,)
            (by_worker,) = conn.execute(
                "SELECT count(DISTINCT executor_id) FROM dbos.workflow_status "
                "WHERE workflow_uuid = ANY(%s)",
                (ids,),
            ).fetchone() or (0,)
            # Where a task's time went: waiting in the queue (enqueued to its first step),
            # its steps, and between them (the workflow body, DBOS's own records).
            (waited, ran, inside) = conn.execute(
                "SELECT avg(first_ms - w.created_at) / 1000, avg(last_ms - first_ms) / 1000,"
                " avg(inside_ms) / 1000 FROM dbos.workflow_status w JOIN ("
                "  SELECT workflow_uuid, min(started_at_epoch_ms) AS first_ms,"
                "         max(completed_at_epoch_ms) AS last_ms,"
                "         sum(completed_at_epoch_ms - started_at_epoch_ms) AS inside_ms"
                "  FROM dbos.operation_outputs WHERE workflow_uuid = ANY(%s)"
                "  GROUP BY workflow_uuid) o USING (workflow_uuid)",
                (ids,),
            ).fetchone() or (0, 0, 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)
    items = args.tasks * args.items
    return {
        "seconds": took,
        "item_steps_per_s": items / took,
        "steps_per_s": steps / took,
        "workers_used": by_worker,
        "queued_s": float(waited or 0),
        "run_s": float(ran or 0),
        "in_steps_s": float(inside or 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--items", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=2, help="runs per worker at once")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--port", type=int, default=18400)
    args = parser.parse_args()
    name = f"a2a_bench_scale_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = make_conninfo(args.server, dbname=name)
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"{args.tasks} tasks x {args.items} items of `sleep {args.sleep}`, "
        f"{args.concurrency} run(s) per worker at once, {os.cpu_count()} cores"
    )
    results = {}
    try:
        for n, workers in enumerate(args.workers):
            results[workers] = measure(args, database, workers, args.port + 10 * n)
            r = results[workers]
            print(
                f"{workers} worker(s): {r['seconds']:.1f} s, "
                f"{r['item_steps_per_s']:.2f} item steps/s, {r['steps_per_s']:.1f} steps/s "
                f"(all recorded steps), runs spread over {r['workers_used']:.0f} worker(s); "
                f"a task waited {r['queued_s']:.2f} s in the queue and ran {r['run_s']:.2f} s "
                f"({r['in_steps_s']:.2f} s in its steps), on average",
                flush=True,
            )
    finally:
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    base = results[args.workers[0]]["item_steps_per_s"]
    print("\n| workers | item steps/s | all steps/s | speed-up |")
    print("| --- | --- | --- | --- |")
    for workers, r in results.items():
        print(
            f"| {workers} | {r['item_steps_per_s']:.2f} | {r['steps_per_s']:.1f} | "
            f"{r['item_steps_per_s'] / base:.2f}x |"
        )


if __name__ == "__main__":
    main()
