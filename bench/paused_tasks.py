"""What waiting tasks cost the workers: 10,000 and then 100,000 tasks paused at once.

A paused task is rows (tasks, items, pauses, transitions, events, a checkpoint, a finished
DBOS workflow) and nothing in a process. This benchmark makes `--real` tasks pause through
A2A (a plan whose item is irreversible), then copies the rows of one of them (every table
that holds a task, DBOS's included) until `--counts` tasks wait, and after each step
restarts the server and measures its readiness time and the worker's RSS, right after it is
ready and after `--idle` seconds (the supervisor's scans have run). Finally one copied task
is approved and must run to completion (its workspace is restored from its checkpoint).

    .venv/bin/python bench/paused_tasks.py --counts 10000 100000

Targets (issue 10): 100,000 waiting tasks cost the workers <= 100 MB and add <= 5 s to a
restart. Prints its figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.support.processes import AgentProcess  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# What a waiting task is in the database: its rows, counted after each step.
STORED = ("tasks", "items", "pauses", "transitions", "events", "checkpoints",
          "dbos.workflow_status", "dbos.operation_outputs")  # fmt: skip
TASK_TABLES = ("items", "pauses", "transitions", "events", "checkpoints", "messages")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return dict(reply["result"])


def irreversible_plan(n: int) -> dict[str, Any]:
    plan = {
        "goal": f"waiting task {n}",
        "items": [{"id": "deploy", "run": "true", "verify": "true", "irreversible": True}],
    }
    return {
        "configuration": {"returnImmediately": True},
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"plan": plan}}],
        },
    }


class Bench:
    def __init__(self, server: str) -> None:
        self.server = server
        self.name = f"a2a_bench_paused_{uuid.uuid4().hex[:8]}"
        self.url = make_conninfo(server, dbname=self.name)
        self.home = Path(tempfile.mkdtemp(prefix="a2a-paused-"))
        self.proc: AgentProcess | None = None
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(Exception):
                self.proc.kill()
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )
        shutil.rmtree(self.home, ignore_errors=True)

    def start(self) -> float:
        """Start the server; seconds until it answers /readyz."""
        self.proc = AgentProcess(
            role="serve", database_url=self.url, home=self.home, executor_id="paused-bench"
        )
        began = time.monotonic()
        self.proc.start(wait=True)
        return time.monotonic() - began

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.stop()
        self.proc = None

    def worker_pid(self) -> int:
        with psycopg.connect(self.url) as conn:
            cur = conn.execute("SELECT pid FROM workers WHERE executor_id = 'paused-bench'")
            row = cur.fetchone()
        assert row is not None
        return int(row[0])

    def count(self, query: str) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(query).fetchone()  # type: ignore[arg-type]
        return int(row[0]) if row else 0

    def wait_waiting(self, n: int, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while self.count("SELECT count(*) FROM tasks WHERE state = 'input_required'") < n:
            if time.monotonic() > deadline:
                raise TimeoutError("tasks did not pause")
            time.sleep(0.2)

    def copy(self, template: str, total: int) -> None:
        """Copy every row of `template` until `total` tasks wait (one statement per table)."""
        have = self.count("SELECT count(*) FROM tasks WHERE state = 'input_required'")
        extra = total - have
        if extra <= 0:
            return
        with psycopg.connect(self.url) as conn:
            conn.execute(
                "CREATE TEMP TABLE new_ids AS SELECT gen_random_uuid()::text AS id "
                "FROM generate_series(1, %s)",
                (extra,),
            )
            conn.execute(
                "INSERT INTO tasks SELECT (jsonb_populate_record(NULL::tasks, to_jsonb(t) "
                "|| jsonb_build_object('id', n.id))).* FROM tasks t, new_ids n WHERE t.id = %s",
                (template,),
            )
            for table in TASK_TABLES:
                extra_keys = ""
                if table == "messages":
                    extra_keys = "|| jsonb_build_object('message_id', n.id)"
                conn.execute(
                    sql.SQL(
                        "INSERT INTO {t} SELECT (jsonb_populate_record(NULL::{t}, to_jsonb(x) "
                        "|| jsonb_build_object('task_id', n.id) " + extra_keys + ")).* "
                        "FROM {t} x, new_ids n WHERE x.task_id = %s"
                    ).format(t=sql.Identifier(table)),
                    (template,),
                )
            conn.execute(
                "INSERT INTO effects SELECT (jsonb_populate_record(NULL::effects, to_jsonb(e) "
                "|| jsonb_build_object('task_id', n.id, 'key', n.id || substr(e.key, %s)))).* "
                "FROM effects e, new_ids n WHERE e.task_id = %s",
                (len(template) + 1, template),
            )
            conn.execute(
                "INSERT INTO dbos.workflow_status SELECT (jsonb_populate_record("
                "NULL::dbos.workflow_status, to_jsonb(w) "
                "|| jsonb_build_object('workflow_uuid', n.id))).* "
                "FROM dbos.workflow_status w, new_ids n WHERE w.workflow_uuid = %s",
                (template,),
            )
            conn.execute("ANALYZE")

    def measure(self, label: str, idle_s: float) -> dict[str, Any]:
        ready_s = self.start()
        pid = self.worker_pid()
        at_ready = rss_mb(pid)
        time.sleep(idle_s)
        after_idle = rss_mb(pid)
        waiting = self.count("SELECT count(*) FROM tasks WHERE state = 'input_required'")
        stored = {table: self.count(f"SELECT count(*) FROM {table}") for table in STORED}
        megabytes = self.count("SELECT pg_database_size(current_database()) / 1048576")
        self.stop()
        return {
            "label": label,
            "waiting": waiting,
            "ready_s": round(ready_s, 2),
            "rss_at_ready_mb": round(at_ready, 1),
            "rss_after_idle_mb": round(after_idle, 1),
            "rows": stored,
            "database_mb": megabytes,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.environ.get("BENCH_PG", DEFAULT_SERVER))
    parser.add_argument("--real", type=int, default=20, help="tasks paused through A2A")
    parser.add_argument("--counts", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--idle", type=float, default=15.0, help="seconds idle before RSS")
    args = parser.parse_args()
    print("command:", shlex.join([Path(sys.executable).name, *sys.argv]), flush=True)
    if "user" not in conninfo_to_dict(args.server):
        args.server = make_conninfo(args.server, user="postgres")
    bench = Bench(args.server)
    try:
        bench.start()
        assert bench.proc is not None
        task_ids = [
            rpc(bench.proc.url, "SendMessage", irreversible_plan(n))["task"]["id"]
            for n in range(args.real)
        ]
        bench.wait_waiting(args.real)
        bench.stop()
        results = [bench.measure(f"{args.real} real", args.idle)]
        for total in args.counts:
            bench.copy(task_ids[0], total)
            results.append(bench.measure(f"{total:,}", args.idle))
        # A copied task is as live as the real ones: approve it and it runs to the end.
        ready = bench.start()
        assert bench.proc is not None
        with psycopg.connect(bench.url) as conn:
            row = conn.execute(
                "SELECT id FROM tasks WHERE state = 'input_required' AND id <> ALL(%s) LIMIT 1",
                (task_ids,),
            ).fetchone()
        assert row is not None
        copied = str(row[0])
        reply = {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "taskId": copied,
                "parts": [{"data": {"approval": {"id": "irreversible.deploy",
                                                 "decision": "approve"}}}],
            },
            "configuration": {"returnImmediately": True},
        }  # fmt: skip
        began = time.monotonic()
        rpc(bench.proc.url, "SendMessage", reply)
        state = ""
        while time.monotonic() - began < 60:
            state = rpc(bench.proc.url, "GetTask", {"id": copied})["status"]["state"]
            if state in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"):
                break
            time.sleep(0.1)
        resumed_s = time.monotonic() - began
    finally:
        bench.close()
    base = results[0]
    print(f"{'waiting tasks':>16} {'ready s':>8} {'+ready s':>9} {'RSS ready MB':>13} "
          f"{'RSS idle MB':>12} {'+RSS MB':>8}")  # fmt: skip
    for r in results:
        print(
            f"{r['waiting']:>16,} {r['ready_s']:>8} {r['ready_s'] - base['ready_s']:>9.2f} "
            f"{r['rss_at_ready_mb']:>13} {r['rss_after_idle_mb']:>12} "
            f"{r['rss_after_idle_mb'] - base['rss_after_idle_mb']:>8.1f}"
        )
    print("rows in the database (and its size):")
    for r in results:
        shown = ", ".join(f"{table} {n:,}" for table, n in r["rows"].items())
        print(f"{r['waiting']:>16,} waiting: {shown}; {r['database_mb']:,} MB")
    print(f"a copied task approved after a restart ({ready:.2f} s to ready): {state} "
          f"in {resumed_s:.2f} s")  # fmt: skip
    print(json.dumps({"results": results, "resumed": state, "resumed_s": round(resumed_s, 2)}))


if __name__ == "__main__":
    main()
