"""Push notifications: latency from commit to receipt, and notifications per second.

100 tasks (two items of `true` each) with an inline push config each, spread over 10
receivers on loopback, one of which takes `--slow-s` per call. Phase 1 (live): the tasks run
and every notification's latency is the receipt time minus its event row's commit time.
Phase 2 (backlog): the same again with every receiver down (the deliverer backs off), then the
server is stopped, the backlog released, the server started, and the drain timed.

    .venv/bin/python bench/push_latency.py

Targets (issue 11): p99 <= 50 ms for healthy receivers, >= 1,000 notifications/s, and the
slow receiver costs the others nothing. Prints its figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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
sys.path.insert(0, str(REPO))
from tests.support.processes import AgentProcess  # noqa: E402
from tests.support.receiver import Receiver  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def submit(url: str, hook: str) -> str:
    items = [{"id": f"i{n}", "run": "true", "verify": "true"} for n in range(2)]
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "configuration": {
                "returnImmediately": True,
                "taskPushNotificationConfig": {"url": hook, "id": "bench"},
            },
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"data": {"plan": {"goal": "push bench", "items": items}}}],
            },
        },
    }
    reply = httpx.post(url + "/", json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    return str(reply["result"]["task"]["id"])


class Bench:
    def __init__(self, server: str, slow_s: float) -> None:
        self.server = server
        self.name = f"a2a_bench_push_{uuid.uuid4().hex[:8]}"
        self.url = make_conninfo(server, dbname=self.name)
        self.home = Path(tempfile.mkdtemp(prefix="a2a-push-"))
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
        self.receivers = [Receiver() for _ in range(10)]
        self.receivers[0].delay_s = slow_s
        for r in self.receivers:
            r.thread.start()
        self.proc: AgentProcess | None = None

    def start(self, **env: str) -> AgentProcess:
        self.proc = AgentProcess(
            role="serve",
            database_url=self.url,
            home=self.home,
            executor_id="push-bench",
            env={
                "A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1",
                "A2A_AGENT_PUSH_TIMEOUT_S": "30",
                **env,
            },
        )
        return self.proc.start()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
        for r in self.receivers:
            r.server.shutdown()
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )
        shutil.rmtree(self.home, ignore_errors=True)

    def committed(self, task_ids: list[str]) -> dict[str, float]:
        """Each event's commit time (epoch seconds), by event id."""
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT task_id, seq, extract(epoch FROM at)::float8 FROM events "
                "WHERE task_id = ANY(%s)",
                (task_ids,),
            ).fetchall()
        return {f"{t}:{s}": at for t, s, at in rows}

    def wait_all(
        self, receivers: list[Receiver], expected: dict[str, float], timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        wanted = set(expected)
        while time.monotonic() < deadline:
            got = {r.event_id for rec in receivers for r in rec.accepted()}
            if wanted <= got:
                return
            time.sleep(0.1)


def received_times(receiver: Receiver) -> dict[str, float]:
    first: dict[str, float] = {}
    for r in receiver.accepted():
        first.setdefault(r.event_id, float(r.headers.get("x-received-at", "0")))
    return first


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.environ.get("BENCH_PG", DEFAULT_SERVER))
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--slow-s", type=float, default=5.0)
    args = parser.parse_args()
    bench = Bench(args.server, args.slow_s)
    out: dict[str, Any] = {}
    try:
        proc = bench.start()
        healthy, slow = bench.receivers[1:], bench.receivers[0]
        hooks = [r.url for r in bench.receivers]
        began = time.monotonic()
        tasks = {submit(proc.url, hooks[n % 10]): n % 10 for n in range(args.tasks)}
        healthy_tasks = [t for t, n in tasks.items() if n != 0]
        time.sleep(1)
        while True:  # every run ended
            with psycopg.connect(bench.url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'failed')"
                ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.2)
        runs_s = time.monotonic() - began
        expected = bench.committed(healthy_tasks)
        bench.wait_all(healthy, expected, timeout=60)
        latencies = []
        for rec in healthy:
            for r in rec.accepted():
                at = expected.get(r.event_id)
                if at is not None:
                    latencies.append((r.received_at - at) * 1000)
        got_healthy = {r.event_id for rec in healthy for r in rec.accepted()}
        out["live"] = {
            "tasks": args.tasks,
            "runs_done_s": round(runs_s, 2),
            "healthy_notifications": len(latencies),
            "healthy_missing": len(set(expected) - got_healthy),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(pct(latencies, 99), 1),
            "max_ms": round(max(latencies), 1) if latencies else None,
            "slow_received_by_then": len(slow.received),
        }
        # Phase 2: a backlog drained at once (the receivers were down while the runs went).
        proc.stop()
        for r in bench.receivers:
            r.received.clear()
            r.otherwise = 503
        slow.delay_s = 0.0
        proc = bench.start(A2A_AGENT_PUSH_BACKOFF_S="3600")
        more = [submit(proc.url, hooks[n % 10]) for n in range(args.tasks)]
        while True:
            with psycopg.connect(bench.url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'failed')"
                ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.2)
        proc.stop()
        for r in bench.receivers:
            r.received.clear()
            r.otherwise = 200
        with psycopg.connect(bench.url) as conn:
            conn.execute("UPDATE push_configs SET attempts = 0, next_attempt_at = now()")
        backlog = bench.committed(more)
        with psycopg.connect(bench.url) as conn:
            pending = conn.execute(
                "SELECT coalesce(sum(t.event_seq - c.acked_seq), 0) FROM push_configs c "
                "JOIN tasks t ON t.id = c.task_id WHERE c.task_id = ANY(%s)",
                (more,),
            ).fetchone()
        began = time.monotonic()
        bench.start()
        bench.wait_all(bench.receivers, backlog, timeout=120)
        drained_s = time.monotonic() - began
        sent = sum(len({r.event_id for r in rec.accepted()}) for rec in bench.receivers)
        first = min(r.received_at for rec in bench.receivers for r in rec.accepted())
        last = max(r.received_at for rec in bench.receivers for r in rec.accepted())
        out["backlog"] = {
            "pending": int(pending[0]) if pending else 0,
            "delivered": sent,
            "restart_to_drained_s": round(drained_s, 2),
            "first_to_last_s": round(last - first, 2),
            "notifications_per_s": round(sent / max(last - first, 1e-6)),
        }
    finally:
        bench.close()
    live, backlog_out = out["live"], out["backlog"]
    print(
        f"live: {live['tasks']} tasks, runs done in {live['runs_done_s']} s; healthy receivers "
        f"got {live['healthy_notifications']} notifications ({live['healthy_missing']} missing): "
        f"p50 {live['p50_ms']} ms, p99 {live['p99_ms']} ms, max {live['max_ms']} ms; the slow "
        f"receiver ({args.slow_s:g} s per call) had {live['slow_received_by_then']} by then"
    )
    print(
        f"backlog: {backlog_out['delivered']} of {backlog_out['pending']} delivered; "
        f"{backlog_out['notifications_per_s']} notifications/s "
        f"(first to last {backlog_out['first_to_last_s']} s; restart to drained "
        f"{backlog_out['restart_to_drained_s']} s)"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
