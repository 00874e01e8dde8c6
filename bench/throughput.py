"""Throughput of our server against the a2a-sdk 1.3 reference server, side by side, with wrk.

Each server process is pinned to one core (`taskset -c 0`), wrk to another (`taskset -c 1`).
Measured, per server: GetTask of an existing task, and SendMessage with returnImmediately that
creates a new task per request (unique messageId per request). Ours runs on a fresh PostgreSQL
database that this script creates and drops; the reference runs with its InMemoryTaskStore and,
when asyncpg (or psycopg) is importable, with its SQLAlchemy DatabaseTaskStore on another fresh
database. Ours is measured for SendMessage with `serve --no-worker` (the API path alone: with a
worker, every task would also run git and commands on the same core).

    .venv/bin/python bench/throughput.py [--duration 10] [--connections 50] [--profile]

Needs wrk (`apt-get install -y wrk`) and a PostgreSQL at --database-url (trust auth).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")
EXTRA_SITE = "/tmp/a2a-bench-venv/lib/python3.11/site-packages"  # asyncpg, py-spy
TARGET_P99_MS = 60.0
PLAN = {
    "plan": {"goal": "bench", "items": [{"id": "a", "title": "a", "run": "true", "verify": "true"}]}
}
HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}

LUA = r"""
local pre, post = [==[%PRE%]==], [==[%POST%]==]
local threads, counter = {}, 0
bad = 0
function setup(thread)
  table.insert(threads, thread)
  thread:set("tid", #threads)
end
wrk.method = "POST"
wrk.headers["A2A-Version"] = "1.0"
wrk.headers["Content-Type"] = "application/json"
function request()
  counter = counter + 1
  local body = pre
  if post ~= "" then body = pre .. "%RUN%-" .. tid .. "-" .. counter .. post end
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  local e = summary.errors
  io.write(string.format(
    'BENCH {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,"p90_us":%d,' ..
    '"p99_us":%d,"max_us":%d,"bad":%d,"socket_errors":%d}\n',
    summary.requests, summary.duration, summary.bytes, latency:percentile(50),
    latency:percentile(90), latency:percentile(99), latency.max, b,
    e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass
class Result:
    server: str
    operation: str
    rps: float
    p50_ms: float
    p99_ms: float
    bad: int
    bytes_per_response: float
    server_cpu_pct: float  # of one core
    server_ms_per_req: float  # server CPU time per request
    db_ms_per_req: float  # CPU time of the PostgreSQL backends serving it, per request
    other_cores: float  # busy CPU not from the server, its backends or wrk (other people)


@dataclass
class Target:
    label: str
    port: int
    pid: int
    database: str | None


TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def busy_cpu_s() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / TICK  # all but idle and iowait


def rpc_body(method: str, params: dict[str, object]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def send_params(message_id: str, parts: Sequence[Mapping[str, object]]) -> dict[str, object]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": parts}
    return {"configuration": {"returnImmediately": True}, "message": message}


def call(port: int, method: str, params: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/", rpc_body(method, params).encode(), HEADERS
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        body: dict[str, object] = json.load(reply)
    if "result" not in body:
        raise RuntimeError(f"{method} failed: {body}")
    result = body["result"]
    assert isinstance(result, dict)
    return result


def with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="a2a-bench-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.databases: list[str] = []
        self.commands: list[str] = []
        self.results: list[Result] = []
        self.notes: list[str] = []
        self.profiles: list[str] = []
        self.run_id = uuid.uuid4().hex[:8]
        self.ports = iter(range(args.port, args.port + 100))

    # ---- resources -------------------------------------------------------------------------

    def create_database(self, suffix: str) -> str:
        name = f"a2a_bench_{self.run_id}{suffix}"
        with psycopg.connect(self.args.database_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        self.databases.append(name)
        return with_db(self.args.database_url, name)

    def cleanup(self) -> None:
        for proc in self.procs:
            self.stop(proc)
        with suppress(psycopg.Error), psycopg.connect(self.args.database_url, autocommit=True) as c:
            for name in self.databases:
                c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
        shutil.rmtree(self.tmp, ignore_errors=True)

    def stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def backend_cpu_s(self, database: str | None) -> dict[int, float]:
        if database is None:
            return {}
        with psycopg.connect(self.args.database_url, autocommit=True) as conn:
            query = b"SELECT pid FROM pg_stat_activity WHERE datname = %s"
            pids = [int(row[0]) for row in conn.execute(query, (database,))]
        return {pid: proc_cpu_s(pid) for pid in pids}

    @contextmanager
    def server(
        self, label: str, argv: list[str], env: dict[str, str], database: str | None
    ) -> Iterator[Target]:
        port = next(self.ports)
        argv = ["taskset", "-c", self.args.server_core, *argv, "--port", str(port)]
        shown = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
        self.commands.append(f"{label}: {shown}{shlex.join(argv)}")
        log_path = self.tmp / (re.sub(r"\W+", "_", label) + ".log")
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                argv, cwd=self.tmp, env={**os.environ, **env}, stdout=log, stderr=log
            )
            self.procs.append(proc)
            try:
                self.wait_ready(proc, port, log_path)
                yield Target(label, port, proc.pid, database)
            finally:
                self.stop(proc)
                self.procs.remove(proc)

    def wait_ready(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            ready = f"http://127.0.0.1:{port}/readyz"
            with suppress(OSError, urllib.error.URLError), urllib.request.urlopen(ready) as r:
                if r.status == 200:
                    return
            time.sleep(0.25)
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{log.stem} did not become ready on port {port}:\n{tail}")

    # ---- load -----------------------------------------------------------------------------

    def wrk(self, target: Target, operation: str, body: str) -> None:
        """Load `body` (a "@@" in it becomes a unique id per request) and record the result."""
        pre, _, post = body.partition("@@")
        name = re.sub(r"\W+", "_", f"{target.label}-{operation}")
        lua = self.tmp / f"{name}.lua"
        script = LUA.replace("%PRE%", pre).replace("%POST%", post)
        lua.write_text(script.replace("%RUN%", f"{self.run_id}-{len(self.results)}"))
        a = self.args
        base = ["taskset", "-c", a.load_core, "wrk", "-t1", f"-c{a.connections}"]
        url = f"http://127.0.0.1:{target.port}/"
        tail = ["--latency", "--timeout", "30s", "-s", str(lua), url]
        if a.warmup > 0:
            subprocess.run([*base, f"-d{a.warmup}s", *tail], capture_output=True, check=True)
        argv = [*base, f"-d{a.duration}s", *tail]
        self.commands.append(f"{target.label} {operation}: {shlex.join(argv)}")
        profiler = self.start_profile(target.pid, name)
        db0, srv0, busy0 = self.backend_cpu_s(target.database), proc_cpu_s(target.pid), busy_cpu_s()
        kids0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        kids1, wall = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic() - t0
        busy, srv = busy_cpu_s() - busy0, proc_cpu_s(target.pid) - srv0
        db = sum(
            cpu - db0.get(pid, 0.0) for pid, cpu in self.backend_cpu_s(target.database).items()
        )
        load = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
        if profiler is not None:
            profiler.wait()
        s = json.loads(next(x for x in out.splitlines() if x.startswith("BENCH "))[6:])
        n = max(s["requests"], 1)
        r = Result(
            server=target.label,
            operation=operation,
            rps=s["requests"] / (s["duration_us"] / 1e6),
            p50_ms=s["p50_us"] / 1000,
            p99_ms=s["p99_us"] / 1000,
            bad=s["bad"] + s["socket_errors"],
            bytes_per_response=s["bytes"] / n,
            server_cpu_pct=100 * srv / wall,
            server_ms_per_req=1000 * srv / n,
            db_ms_per_req=1000 * db / n,
            other_cores=max(busy - srv - db - load, 0.0) / wall,
        )
        self.results.append(r)
        print(f"  {r.server:<22} {operation:<30} {r.rps:8.1f} req/s  p99 {r.p99_ms:7.1f} ms")

    def start_profile(self, pid: int, name: str) -> subprocess.Popen[bytes] | None:
        spy = self.args.py_spy
        if not self.args.profile or not spy:
            return None
        out = self.tmp / f"{name}.collapsed"
        argv = [spy, "record", "-p", str(pid), "-d", str(self.args.duration), "-r", "200"]
        argv += ["--nonblocking", "--format", "raw", "-o", str(out)]
        self.profiles.append(str(out))
        return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # ---- the measurements ------------------------------------------------------------------

    def measure_reference(self, store: str) -> None:
        argv = [PYTHON, str(ROOT / "bench" / "reference_server.py"), "--store", store]
        env: dict[str, str] = {}
        database = None
        if store == "postgres":
            argv += ["--database-url", self.create_database("_ref")]
            database = self.databases[-1]
            if Path(self.args.extra_site).is_dir():
                env["PYTHONPATH"] = self.args.extra_site
        with self.server(f"reference ({store})", argv, env, database) as target:
            self.wrk(target, "GetTask", rpc_body("GetTask", {"id": self.seed(target.port)}))
            plan = rpc_body("SendMessage", send_params("@@", [{"data": PLAN}]))
            self.wrk(target, "SendMessage returnImmediately", plan)

    def measure_ours(self) -> None:
        url = self.create_database("")
        env = {
            "DATABASE_URL": url,
            "A2A_AGENT_HOME": str(self.tmp / "home"),
            "A2A_AGENT_EXECUTOR_ID": "bench",
        }
        serve, database = [PYTHON, "-m", "a2a_agent", "serve"], self.databases[-1]
        with self.server("ours", serve, env, database) as target:
            task_id = self.seed(target.port)
            state = self.wait_terminal(target.port, task_id)
            self.notes.append(f"ours GetTask reads a task in state {state} (the worker ran it)")
            self.wrk(target, "GetTask", rpc_body("GetTask", {"id": task_id}))
        with self.server("ours (--no-worker)", [*serve, "--no-worker"], env, database) as target:
            plan = rpc_body("SendMessage", send_params("@@", [{"data": PLAN}]))
            self.wrk(target, "SendMessage returnImmediately", plan)
            fresh = rpc_body("GetTask", {"id": self.seed(target.port)})
            self.wrk(target, "GetTask (submitted task)", fresh)
            if self.args.text_only:
                text = rpc_body("SendMessage", send_params("@@", [{"text": "hello"}]))
                self.wrk(target, "SendMessage text (REJECTED)", text)

    def seed(self, port: int) -> str:
        """One task made by SendMessage returnImmediately with the plan; its id."""
        task = call(port, "SendMessage", send_params(f"seed-{self.run_id}", [{"data": PLAN}]))
        inner = task.get("task")
        assert isinstance(inner, dict)
        return str(inner["id"])

    def wait_terminal(self, port: int, task_id: str) -> str:
        deadline, state = time.monotonic() + 60, "?"
        while time.monotonic() < deadline:
            status = call(port, "GetTask", {"id": task_id, "historyLength": 0})["status"]
            assert isinstance(status, dict)
            state = str(status["state"])
            if state in {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"}:
                break
            time.sleep(0.2)
        return state

    # ---- report ---------------------------------------------------------------------------

    def report(self) -> None:
        a = self.args
        print(f"\nwrk -t1 -c{a.connections} -d{a.duration}s (after {a.warmup}s warm-up);", end=" ")
        print(f"servers on core {a.server_core}, wrk on core {a.load_core} of {os.cpu_count()};")
        print("PostgreSQL unpinned; uvicorn defaults (h11, asyncio loop) for both servers")
        print(
            f"\n{'server':<22} {'operation':<30} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
            f" {'errors':>6} {'B/resp':>6} {'srv cpu':>7} {'srv ms/req':>10} {'db ms/req':>9}"
            f" {'other load':>10}"
        )
        for r in self.results:
            print(
                f"{r.server:<22} {r.operation:<30} {r.rps:8.1f} {r.p50_ms:7.1f} {r.p99_ms:7.1f}"
                f" {r.bad:6d} {r.bytes_per_response:6.0f} {r.server_cpu_pct:6.0f}%"
                f" {r.server_ms_per_req:10.2f} {r.db_ms_per_req:9.2f} {r.other_cores:5.2f} cores"
            )
        print("srv cpu: server process CPU / wall (100% = its core saturated); ms/req: CPU time")
        print("per request in the server and in its PostgreSQL backends; other load: busy CPU of")
        print("everything else on the machine (other people's processes) during the measurement")
        print("\nratios: req/s of ours / req/s of the reference (target: >= 1.00 vs in-memory)")
        refs = [r for r in self.results if r.server.startswith("ref")]
        for mine in (r for r in self.results if r.server.startswith("ours")):
            ok = "yes" if mine.p99_ms <= TARGET_P99_MS else "NO"
            print(f"  {mine.server} {mine.operation}: {mine.rps:.1f} req/s,", end=" ")
            print(f"p99 {mine.p99_ms:.1f} ms (p99 <= {TARGET_P99_MS:.0f} ms: {ok})")
            for ref in (r for r in refs if r.operation == mine.operation.split(" (")[0]):
                ratio = mine.rps / ref.rps
                print(f"    vs {ref.server:<22} {ref.rps:8.1f} req/s   ours/ref = {ratio:5.2f}")
        print("closed loop: p50 is about connections / (req/s), so p99 <= 60 ms at 50 connections")
        print("needs well over 833 req/s. Project figures for the reference (one core, wrk -c50):")
        print("GetTask 1371 (memory), 207 (SQLAlchemy Postgres); SendMessage 140 and 19.5.")
        for note in self.notes:
            print(f"note: {note}")
        print("\ncommands:")
        for command in self.commands:
            print(f"  {command}")
        for path in self.profiles:
            print_profile(Path(path))


FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def print_profile(path: Path, top: int = 20) -> None:
    """Top functions of a py-spy raw (collapsed) profile, by own and by inclusive samples."""
    if not path.exists():
        print(f"\nprofile {path.stem}: none written")
        return
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for frame in stack.split(";"):
            m = FRAME.match(frame)
            frames.append(f"{m['func']} ({m['file'].rsplit('/', 1)[-1]})" if m else frame)
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            inclusive[frame] += int(count)
    print(f"\nprofile {path.stem}: {total} samples (py-spy 200 Hz, all threads, idle excluded)")
    for title, counter in (("own", own), ("inclusive", inclusive)):
        print(f"  top {top} by {title} samples:")
        for frame, n in counter.most_common(top):
            print(f"    {100 * n / max(total, 1):5.1f}%  {frame[:110]}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    p.add_argument("--warmup", type=int, default=2, help="seconds of unrecorded load first")
    p.add_argument("--connections", type=int, default=50)
    p.add_argument(
        "--database-url",
        default="postgresql://root@127.0.0.1:5432/postgres",
        help="an admin connection; fresh databases are created beside it and dropped",
    )
    p.add_argument("--port", type=int, default=8300, help="first port to use")
    p.add_argument("--server-core", default="0")
    p.add_argument("--load-core", default="1")
    p.add_argument("--no-reference-postgres", action="store_true")
    p.add_argument("--no-text-only", dest="text_only", action="store_false")
    p.add_argument("--extra-site", default=EXTRA_SITE, help="where asyncpg is (PYTHONPATH)")
    p.add_argument("--profile", action="store_true", help="py-spy every measurement (skews it)")
    default_spy = shutil.which("py-spy") or "/tmp/a2a-bench-venv/bin/py-spy"
    p.add_argument("--py-spy", default=default_spy if Path(default_spy).exists() else None)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get update && apt-get install -y wrk", file=sys.stderr)
        return 2
    if shutil.which("taskset") is None:
        print("taskset is not installed (util-linux)", file=sys.stderr)
        return 2
    if args.profile and not args.py_spy:
        print("--profile needs py-spy (e.g. pip install py-spy in a /tmp venv)", file=sys.stderr)
        return 2

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    bench = Bench(args)
    try:
        print("measuring (each server alone on its core):")
        bench.measure_reference("memory")
        if not args.no_reference_postgres:
            bench.measure_reference("postgres")
        bench.measure_ours()
        bench.report()
        return 0
    except KeyboardInterrupt:
        print("\ninterrupted; cleaning up", file=sys.stderr)
        return 130
    finally:
        bench.cleanup()


if __name__ == "__main__":
    sys.exit(main())
