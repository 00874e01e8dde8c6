"""Push notifications: latency from commit to receipt, and notifications per second.

100 tasks (two items of `true` each) with an inline push config each, spread over 10
receivers on loopback (bench/receivers.py, in a process of their own), one of which takes
`--slow-s` per call. Phase 1 (live): the tasks run
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
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
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

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


class Receivers:
    """The receivers' process, driven over their control endpoints."""

    def __init__(self, count: int, slow_s: float) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(REPO / "bench" / "receivers.py"),
                "--count",
                str(count),
                "--slow-s",
                str(slow_s),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.bases: list[str] = json.loads(self.proc.stdout.readline())
        self.urls = [b + "/hook" for b in self.bases]

    def records(self, n: int) -> list[tuple[str, float, int]]:
        return [tuple(r) for r in httpx.get(self.bases[n] + "/records", timeout=30).json()]

    def accepted(self, n: int) -> dict[str, float]:
        """Event id -> first 2xx receipt time."""
        first: dict[str, float] = {}
        for event_id, at, status in self.records(n):
            if 200 <= status < 300:
                first.setdefault(event_id, at)
        return first

    def mode(self, status: int, delay_s: float | None = None) -> None:
        for base in self.bases:
            params: dict[str, Any] = {"status": status}
            if delay_s is not None:
                params["delay_s"] = delay_s
            httpx.post(base + "/mode", params=params, timeout=30)
            httpx.post(base + "/clear", timeout=30)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def cpu_s(pid: int) -> float:
    """User + system CPU seconds so far of a process and its live descendants (the server's
    nanny runs the service as a child)."""
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    tree, ticks = {pid}, 0
    for _ in range(4):
        tree |= {p for p, (parent, _t) in stats.items() if parent in tree}
    ticks = sum(stats[p][1] for p in tree if p in stats)
    return ticks / os.sysconf("SC_CLK_TCK")


class StreamWatch:
    """A SubscribeToTask stream on one task, read in a thread: each event id's arrival."""

    def __init__(self, url: str, task_id: str) -> None:
        self.arrived: dict[str, float] = {}
        self.opened_at = time.time() + 3600.0  # until the first frame came
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        self.thread = threading.Thread(target=self._read, args=(url, body), daemon=True)
        self.thread.start()

    def _read(self, url: str, body: dict[str, Any]) -> None:
        headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
        with (
            httpx.Client(timeout=120) as client,
            client.stream("POST", url + "/", json=body, headers=headers) as response,
        ):
            for line in response.iter_lines():
                if line.startswith("id:") and not self.arrived:
                    self.opened_at = time.time()
                if line.startswith("id:"):
                    self.arrived.setdefault(line[3:].strip(), time.time())


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
        self.receivers = Receivers(10, slow_s)
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
        self.receivers.close()
        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.name))
            )
        shutil.rmtree(self.home, ignore_errors=True)

    def wait_runs(self) -> None:
        time.sleep(1)
        while True:
            with psycopg.connect(self.url) as conn:
                row = conn.execute(
                    "SELECT count(*) FROM tasks WHERE state NOT IN ('completed', 'failed')"
                ).fetchone()
            if row is not None and row[0] == 0:
                return
            time.sleep(0.2)

    def committed(self, task_ids: list[str]) -> dict[str, float]:
        """Each event's commit time (epoch seconds), by event id."""
        with psycopg.connect(self.url) as conn:
            rows = conn.execute(
                "SELECT task_id, seq, extract(epoch FROM at)::float8 FROM events "
                "WHERE task_id = ANY(%s)",
                (task_ids,),
            ).fetchall()
        return {f"{t}:{s}": at for t, s, at in rows}

    def wait_all(self, receivers: list[int], expected: dict[str, float], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        wanted = set(expected)
        while time.monotonic() < deadline:
            got = {e for n in receivers for e in self.receivers.accepted(n)}
            if wanted <= got:
                return
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.environ.get("BENCH_PG", DEFAULT_SERVER))
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--slow-s", type=float, default=5.0)
    args = parser.parse_args()
    print("command:", shlex.join([Path(sys.executable).name, *sys.argv]), flush=True)
    bench = Bench(args.server, args.slow_s)
    out: dict[str, Any] = {}
    try:
        proc = bench.start()
        receivers = bench.receivers
        healthy = list(range(1, 10))
        began = time.monotonic()
        tasks = {submit(proc.url, receivers.urls[n % 10]): n % 10 for n in range(args.tasks)}
        healthy_tasks = [t for t, n in tasks.items() if n != 0]
        # A stream on the last task whose webhook is the slow receiver.
        watched = [t for t, n in tasks.items() if n == 0][-1]
        stream = StreamWatch(proc.url, watched)
        bench.wait_runs()
        runs_s = time.monotonic() - began
        expected = bench.committed(healthy_tasks)
        bench.wait_all(healthy, expected, timeout=60)
        got = {e: at for n in healthy for e, at in receivers.accepted(n).items()}
        latencies = [(got[e] - at) * 1000 for e, at in expected.items() if e in got]
        stream.thread.join(30)
        streamed = bench.committed([watched])
        stream_ms = [
            (stream.arrived[e] - at) * 1000 for e, at in streamed.items() if e in stream.arrived
        ]
        out["live"] = {
            "tasks": args.tasks,
            "runs_done_s": round(runs_s, 2),
            "healthy_notifications": len(latencies),
            "healthy_missing": len(set(expected) - set(got)),
            "p50_ms": round(statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(pct(latencies, 99), 1),
            "max_ms": round(max(latencies), 1) if latencies else None,
            "slow_received_by_then": len(receivers.records(0)),
            "stream_events": len(stream_ms),
            "stream_p50_ms": round(statistics.median(stream_ms), 1) if stream_ms else None,
            "stream_max_ms": round(max(stream_ms), 1) if stream_ms else None,
        }
        # Phase 2: a backlog drained at once (the receivers were down while the runs went).
        proc.stop()
        receivers.mode(503, delay_s=0.0)
        proc = bench.start(A2A_AGENT_PUSH_BACKOFF_S="3600")
        more = [submit(proc.url, receivers.urls[n % 10]) for n in range(args.tasks)]
        bench.wait_runs()
        proc.stop()
        receivers.mode(200)
        with psycopg.connect(bench.url) as conn:
            conn.execute(
                "UPDATE push_configs SET attempts = 0, next_attempt_at = now() "
                "WHERE task_id = ANY(%s)",
                (more,),
            )
            conn.execute(  # the first phase's leftovers (the slow receiver's) are not counted
                "UPDATE push_configs SET state = 'dead' WHERE NOT task_id = ANY(%s)", (more,)
            )
        backlog = bench.committed(more)
        with psycopg.connect(bench.url) as conn:
            pending = conn.execute(
                "SELECT coalesce(sum(t.event_seq - c.acked_seq), 0) FROM push_configs c "
                "JOIN tasks t ON t.id = c.task_id WHERE c.task_id = ANY(%s)",
                (more,),
            ).fetchone()
        began = time.monotonic()
        proc = bench.start()
        cpu_before = cpu_s(proc.proc.pid)
        bench.wait_all(list(range(10)), backlog, timeout=120)
        drained_s = time.monotonic() - began
        cpu_used = cpu_s(proc.proc.pid) - cpu_before
        firsts = [receivers.accepted(n) for n in range(10)]
        times = [at for first in firsts for e, at in first.items() if e in backlog]
        sent = len(times)
        out["backlog"] = {
            "pending": int(pending[0]) if pending else 0,
            "delivered": sent,
            "restart_to_drained_s": round(drained_s, 2),
            "first_to_last_s": round(max(times) - min(times), 2),
            "notifications_per_s": round(sent / max(max(times) - min(times), 1e-6)),
            "server_cpu_ms_per_notification": round(cpu_used * 1000 / max(sent, 1), 3),
        }
    finally:
        bench.close()
    live, backlog_out = out["live"], out["backlog"]
    print(
        f"live: {live['tasks']} tasks, runs done in {live['runs_done_s']} s; healthy receivers "
        f"got {live['healthy_notifications']} notifications ({live['healthy_missing']} missing): "
        f"p50 {live['p50_ms']} ms, p99 {live['p99_ms']} ms, max {live['max_ms']} ms; the slow "
        f"receiver ({args.slow_s:g} s per call) had {live['slow_received_by_then']} by then; "
        f"a stream on one of its tasks got {live['stream_events']} events, p50 "
        f"{live['stream_p50_ms']} ms, max {live['stream_max_ms']} ms after their commit"
    )
    print(
        f"backlog: {backlog_out['delivered']} of {backlog_out['pending']} delivered; "
        f"{backlog_out['notifications_per_s']} notifications/s "
        f"(first to last {backlog_out['first_to_last_s']} s; restart to drained "
        f"{backlog_out['restart_to_drained_s']} s); server CPU "
        f"{backlog_out['server_cpu_ms_per_notification']} ms per notification"
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
