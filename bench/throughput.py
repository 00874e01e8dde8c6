"""Throughput of our server against the a2a-sdk 1.3 reference server, side by side, with wrk.

Each server is pinned to one core (`taskset -c 0`; ours forks its serving child there too), wrk
to the other (`taskset -c 1`). Measured on each: GetTask of an existing task (JSON-RPC, and
`GET /tasks/{id}` of the HTTP+JSON binding), and SendMessage
with returnImmediately creating a new task per request (a unique messageId each). Ours runs on
a fresh PostgreSQL database made and dropped here; the reference with its InMemoryTaskStore and
with its SQLAlchemy DatabaseTaskStore (asyncpg from --extra-site if there, else psycopg) on
another. Ours takes SendMessage with `serve --no-worker`: the API path alone (with a worker,
each task would also run git and its commands on the same core).

    .venv/bin/python bench/throughput.py [--duration 10] [--connections 50] [--profile]

Any checkout, with any interpreter that has the project's dependencies: the servers run under
the interpreter running this script, and ours serves the code of the checkout this script is
in (or of --ours-rev), never whatever the interpreter's editable install points at.

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
from resource import RUSAGE_CHILDREN
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import psycopg

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable  # the running interpreter: no venv assumed inside the checkout
EXTRA = "/tmp/a2a-bench-venv"  # a venv with asyncpg and py-spy (not the project's)
TARGET_P99_MS = 60.0
LIST_PAGE = 10  # tasks in the page ListTasks answers with
ITEM = {"id": "a", "title": "a", "run": "true", "verify": "true"}
PLAN_PARTS = [{"data": {"plan": {"goal": "bench", "items": [ITEM]}}}]
TICK = os.sysconf("SC_CLK_TCK")
LIBS = ("a2a_agent/", "persistence/", "/a2a/", "/dbos/", "psycopg", "sqlalchemy", "asyncpg")
TRUNK = ("/cli.py", "/nanny.py", "/__main__.py", "/reference_server.py")  # every stack has them

LUA = r"""
local pre, post = [==[%PRE%]==], [==[%POST%]==]
local threads, counter = {}, 0
bad = 0
function setup(thread) table.insert(threads, thread); thread:set("tid", #threads) end
wrk.method = "%METHOD%"
wrk.headers["Content-Type"] = "application/json"
if "%VERSION%" ~= "" then wrk.headers["A2A-Version"] = "%VERSION%" end
if "%AUTH%" ~= "" then wrk.headers["Authorization"] = "Bearer %AUTH%" end
function request()
  counter = counter + 1
  local body = pre
  if post ~= "" then body = pre .. "%RUN%-" .. tid .. "-" .. counter .. post end
  if wrk.method == "GET" then return wrk.format(nil, "%PATH%", nil, nil) end
  return wrk.format(nil, nil, nil, body)
end
function response(status, headers, body)
  if status ~= 200 or not string.find(body, '%EXPECT%', 1, true) then bad = bad + 1 end
end
function done(summary, latency, requests)
  local b, e = 0, summary.errors
  for _, t in ipairs(threads) do b = b + t:get("bad") end
  io.write(string.format('BENCH {"requests":%d,"duration_us":%d,"bytes":%d,"p50_us":%d,' ..
    '"p99_us":%d,"bad":%d}\n', summary.requests, summary.duration, summary.bytes,
    latency:percentile(50), latency:percentile(99), b + e.connect + e.read + e.write + e.timeout))
end
"""


@dataclass
class Result:
    server: str
    operation: str
    rps: float
    p50_ms: float
    p99_ms: float
    bad: int  # non-200, JSON-RPC error, socket error or timeout
    bytes_per_response: float
    server_cpu_pct: float  # CPU of the server's process tree / wall; 100 = one core
    server_ms_per_req: float
    db_ms_per_req: float  # CPU of the PostgreSQL backends connected to its database
    other_cores: float  # busy CPU of everything else (other people's work on the machine)


@dataclass
class Target:
    label: str
    port: int
    pid: int
    database: str | None


def proc_cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu_s(root: int) -> dict[int, float]:
    """CPU seconds of `root` and its descendants (ours serves from a forked child)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            ppid = int(stat.read_text().rpartition(")")[2].split()[1])
            children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        found.append(pid := todo.pop())
        todo += children.get(pid, [])
    return {pid: proc_cpu_s(pid) for pid in found}


def busy_cpu_s() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return (sum(values) - values[3] - values[4]) / TICK  # all but idle and iowait


def delta(before: dict[int, float], after: dict[int, float]) -> float:
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=True).stdout


def rpc_body(method: str, params: dict[str, object]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})


def send_body(message_id: str, parts: Sequence[Mapping[str, object]]) -> str:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": parts}
    params = {"configuration": {"returnImmediately": True}, "message": message}
    return rpc_body("SendMessage", params)


KEYS: dict[int, str] = {}  # port -> the API key ours wants (the reference takes none)


def call(port: int, body: str) -> dict[str, object]:
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    if port in KEYS:
        headers["Authorization"] = f"Bearer {KEYS[port]}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}/", body.encode(), headers)
    with urllib.request.urlopen(request, timeout=30) as reply:
        answer: dict[str, object] = json.load(reply)
    result = answer.get("result")
    if not isinstance(result, dict):
        raise RuntimeError(f"{body[:80]} failed: {answer}")
    return result


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.tmp = Path(tempfile.mkdtemp(prefix="a2a-bench-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.databases: list[str] = []
        self.commands: list[str] = []
        self.results: list[Result] = []
        self.notes: list[str] = []
        self.profiles: list[Path] = []
        self.run_id = uuid.uuid4().hex[:8]
        self.ports = iter(range(args.port, args.port + 100))

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.args.database_url, autocommit=True)

    def create_database(self, suffix: str) -> tuple[str, str]:
        name = f"a2a_bench_{self.run_id}{suffix}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"'.encode())
        self.databases.append(name)
        parts = urlsplit(self.args.database_url)
        return name, urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))

    def backend_cpu_s(self, database: str | None) -> dict[int, float]:
        if database is None:
            return {}
        with self.admin() as conn:
            query = b"SELECT pid FROM pg_stat_activity WHERE datname = %s"
            pids = [int(str(row[0])) for row in conn.execute(query, [database])]
        return {pid: proc_cpu_s(pid) for pid in pids}

    def cleanup(self) -> None:
        for proc in self.procs:
            self.stop(proc)
        with suppress(psycopg.Error), self.admin() as conn:
            for name in self.databases:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())
        shutil.rmtree(self.tmp, ignore_errors=True)

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

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
                deadline = time.monotonic() + 90
                while not self.ready(port):
                    if proc.poll() is not None or time.monotonic() > deadline:
                        tail = log_path.read_text(errors="replace")[-3000:]
                        raise RuntimeError(f"{label} did not become ready:\n{tail}")
                    time.sleep(0.25)
                yield Target(label, port, proc.pid, database)
            finally:
                self.stop(proc)
                self.procs.remove(proc)

    @staticmethod
    def ready(port: int) -> bool:
        url = f"http://127.0.0.1:{port}/readyz"
        with suppress(OSError, urllib.error.URLError), urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
        return False

    def wrk(
        self,
        target: Target,
        operation: str,
        body: str,
        *,
        get: str = "",
        version: str = "1.0",
        expect: str = "",
    ) -> None:
        """Load `body` (its "@@" becomes a unique id per request), or GET the path `get`
        (the HTTP+JSON binding's reads), and record the result. `version`: the A2A-Version
        header ("" sends none, as 0.3 clients do); `expect`: what every answer must hold."""
        pre, _, post = body.partition("@@")
        name = re.sub(r"\W+", "_", f"{target.label}-{operation}")
        lua = self.tmp / f"{name}.lua"
        script = LUA.replace("%PRE%", pre).replace("%POST%", post)
        script = script.replace("%METHOD%", "GET" if get else "POST").replace("%PATH%", get)
        script = script.replace("%EXPECT%", expect or ('"id"' if get else '"result"'))
        script = script.replace("%VERSION%", version)
        script = script.replace("%AUTH%", KEYS.get(target.port, ""))
        lua.write_text(script.replace("%RUN%", f"{self.run_id}-{len(self.results)}"))
        a = self.args
        base = ["taskset", "-c", a.load_core, "wrk", "-t1", f"-c{a.connections}"]
        tail = ["--latency", "--timeout", "30s", "-s", str(lua), f"http://127.0.0.1:{target.port}/"]
        if a.warmup > 0:
            subprocess.run([*base, f"-d{a.warmup}s", *tail], capture_output=True, check=True)
        argv = [*base, f"-d{a.duration}s", *tail]
        self.commands.append(f"{target.label} {operation}: {shlex.join(argv)}")
        spy = None
        if a.profile:
            self.profiles.append(self.tmp / f"{name}.collapsed")
            spy_argv = [a.py_spy, "record", "-p", str(target.pid), "-d", str(a.duration)]
            spy_argv += ["-r", "200", "--subprocesses", "--nonblocking", "--format", "raw"]
            spy_argv += ["-o", str(self.profiles[-1])]
            spy = subprocess.Popen(spy_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        database = target.database
        db0, srv0 = self.backend_cpu_s(database), tree_cpu_s(target.pid)
        busy0, kids0, t0 = busy_cpu_s(), resource.getrusage(RUSAGE_CHILDREN), time.time()
        out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
        wall, busy, kids1 = time.time() - t0, busy_cpu_s(), resource.getrusage(RUSAGE_CHILDREN)
        srv, db = delta(srv0, tree_cpu_s(target.pid)), delta(db0, self.backend_cpu_s(database))
        load = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
        if spy is not None:
            spy.wait()
        s = json.loads(next(x for x in out.splitlines() if x.startswith("BENCH "))[6:])
        n = max(s["requests"], 1)
        r = Result(target.label, operation, s["requests"] / (s["duration_us"] / 1e6),
                   s["p50_us"] / 1000, s["p99_us"] / 1000, s["bad"], s["bytes"] / n,
                   100 * srv / wall, 1000 * srv / n, 1000 * db / n,
                   max(busy - busy0 - srv - db - load, 0.0) / wall)  # fmt: skip
        self.results.append(r)
        print(f"  {r.server:<22} {operation:<30} {r.rps:8.1f} req/s  p99 {r.p99_ms:7.1f} ms")

    def measure_reference(self, store: str, http: str = "h11") -> None:
        argv = [PYTHON, str(ROOT / "bench" / "reference_server.py"), "--store", store]
        argv += ["--http", http]
        env: dict[str, str] = {}
        database = None
        if store == "postgres":
            database, url = self.create_database("_ref")
            argv += ["--database-url", url]
            version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
            site = Path(self.args.extra, "lib", version, "site-packages")
            if site.is_dir():
                env["PYTHONPATH"] = str(site)
        label = f"reference ({store}{', httptools' if http == 'httptools' else ''})"
        with self.server(label, argv, env, database) as target:
            task_id = self.seed(target.port)
            self.reads(target, task_id)
            self.wrk(target, "SendMessage returnImmediately", send_body("@@", PLAN_PARTS))

    def reads(self, target: Target, task_id: str, *, settle: bool = False) -> None:
        """Every read on both bindings and both versions: GetTask of `task_id`, ListTasks of
        a page of LIST_PAGE tasks (seeded here, so each server lists as many; with `settle`,
        read once its worker ran them, as a caller lists tasks that do not change)."""
        listed = [self.seed(target.port, f"list-{n}") for n in range(LIST_PAGE)]
        if settle:
            for listed_id in listed:
                self.wait_terminal(target.port, listed_id)
        page = {"pageSize": LIST_PAGE}
        self.wrk(target, "GetTask", rpc_body("GetTask", {"id": task_id}))
        self.wrk(target, "GetTask over HTTP+JSON", "", get=f"/tasks/{task_id}")
        self.wrk(target, "ListTasks", rpc_body("ListTasks", page), expect='"tasks"')
        self.wrk(
            target, "ListTasks over HTTP+JSON", "", get=f"/tasks?pageSize={LIST_PAGE}",
            expect='"tasks"',
        )  # fmt: skip
        self.wrk(target, "GetTask 0.3", rpc_body("tasks/get", {"id": task_id}), version="")
        self.wrk(target, "GetTask 0.3 over HTTP+JSON", "", get=f"/v1/tasks/{task_id}", version="")

    def measure_ours(self) -> None:
        database, url = self.create_database("")
        env = {"DATABASE_URL": url, "A2A_AGENT_HOME": f"{self.tmp}/home"}
        env["A2A_AGENT_EXECUTOR_ID"], serve = "bench", [PYTHON, "-m", "a2a_agent", "serve"]
        rev = self.args.ours_rev or "HEAD"
        sha = git("rev-parse", "--short", rev).decode().strip()
        if self.args.ours_rev:  # a clean export, so others' edits in progress do not count
            (src := self.tmp / "src").mkdir()
            subprocess.run(["tar", "-x", "-C", str(src)], input=git("archive", rev), check=True)
            env["PYTHONPATH"] = str(src)
            self.notes.append(f"ours is {rev} = {sha}, exported with git archive")
        else:
            # The server runs in a scratch directory: without this, `-m a2a_agent` would
            # import whatever checkout the interpreter's editable install points at.
            env["PYTHONPATH"] = str(ROOT)
            dirty = git("status", "--porcelain", "--", "a2a_agent", "persistence").strip()
            state = "with uncommitted changes" if dirty else "clean"
            self.notes.append(f"ours is the working tree of {ROOT} at {sha}, {state}")
        self.notes.append(
            "ours checks an API key on every request (its default; the key from admin.key)"
        )
        with self.server("ours", serve, env, database) as target:
            KEYS[target.port] = (self.tmp / "home" / "admin.key").read_text().strip()
            task_id = self.seed(target.port)
            state = self.wait_terminal(target.port, task_id)
            self.notes.append(f"ours GetTask reads a task in state {state} (the worker ran it)")
            self.notes.append(f"ours ListTasks lists {LIST_PAGE} tasks its worker ran")
            self.reads(target, task_id, settle=True)
        # No worker runs them, so every task sent stays active: without this the caller's
        # limit of active tasks (1,000 by default) refuses all but the first thousand, and
        # wrk would time the refusals.
        env["A2A_AGENT_MAX_ACTIVE_TASKS"] = "0"
        self.notes.append("ours (--no-worker) with A2A_AGENT_MAX_ACTIVE_TASKS=0 (no limit)")
        with self.server("ours (--no-worker)", [*serve, "--no-worker"], env, database) as target:
            KEYS[target.port] = (self.tmp / "home" / "admin.key").read_text().strip()
            self.wrk(target, "SendMessage returnImmediately", send_body("@@", PLAN_PARTS))
            fresh = rpc_body("GetTask", {"id": self.seed(target.port)})
            self.wrk(target, "GetTask (submitted task)", fresh)
            if (
                self.args.text_only
            ):  # stored as REJECTED at once, nothing enqueued: not the headline
                self.wrk(target, "SendMessage text (REJECTED)", send_body("@@", [{"text": "hi"}]))

    @staticmethod
    def wait_terminal(port: int, task_id: str, timeout_s: float = 60) -> str:
        """Poll GetTask until the task ended (or the timeout); its last state."""
        deadline, state = time.monotonic() + timeout_s, ""
        while time.monotonic() < deadline and state not in TERMINAL:
            time.sleep(0.2)
            status = call(port, rpc_body("GetTask", {"id": task_id}))["status"]
            state = str(status["state"]) if isinstance(status, dict) else "?"
        return state

    def seed(self, port: int, name: str = "seed") -> str:
        """One task made by SendMessage returnImmediately with the plan; its id."""
        task = call(port, send_body(f"{name}-{self.run_id}", PLAN_PARTS))["task"]
        assert isinstance(task, dict)
        return str(task["id"])

    def report(self) -> None:
        a = self.args
        print(f"\nwrk -t1 -c{a.connections} -d{a.duration}s (after {a.warmup}s warm-up);", end=" ")
        print(f"servers on core {a.server_core}, wrk on core {a.load_core} of {os.cpu_count()};")
        print("PostgreSQL unpinned; asyncio loop for all; HTTP parser: h11 (uvicorn's default)")
        print("for the reference unless it says httptools, httptools for ours (its setting)\n")
        print(
            f"{'server':<22} {'operation':<30} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
            f" {'errors':>6} {'B/resp':>6} {'srv cpu':>7} {'srv ms/req':>10} {'db ms/req':>9}"
            f" {'other load':>10}"
        )
        for r in self.results:
            print(
                f"{r.server:<22} {r.operation:<30} {r.rps:8.1f} {r.p50_ms:7.1f} {r.p99_ms:7.1f}"
                f" {r.bad:6d} {r.bytes_per_response:6.0f} {r.server_cpu_pct:6.0f}%"
                f" {r.server_ms_per_req:10.2f} {r.db_ms_per_req:9.2f} {r.other_cores:5.2f} cores"
            )
        print("srv cpu: CPU of the server's processes / wall time (100% = its core is saturated);")
        print("ms/req: CPU per request in the server and in its PostgreSQL backends; other load:")
        print("busy CPU of everything else on the machine (other people's work) meanwhile")
        print("\nratios: req/s of ours / req/s of the reference (target: >= 1.00 vs in-memory)")
        refs = [r for r in self.results if r.server.startswith("ref")]
        for mine in (r for r in self.results if r.server.startswith("ours")):
            ok = "yes" if mine.p99_ms <= TARGET_P99_MS else "NO"
            print(f"  {mine.server} {mine.operation}: {mine.rps:.1f} req/s,", end=" ")
            print(f"p99 {mine.p99_ms:.1f} ms (p99 <= {TARGET_P99_MS:.0f} ms: {ok})")
            if mine.bad:  # refusals are fast: a run with errors measures them, not the call
                print(f"    NOT A MEASUREMENT: {mine.bad} answers were errors")
            for ref in (r for r in refs if r.operation == mine.operation.split(" (")[0]):
                ratio, per_cpu = mine.rps / ref.rps, ref.server_ms_per_req / mine.server_ms_per_req
                print(
                    f"    vs {ref.server:<22} {ref.rps:8.1f} req/s   ours/ref = {ratio:5.2f}",
                    end="",
                )
                print(f"   (by server CPU per request, robust to other load: {per_cpu:4.2f})")
        print("closed loop: p50 is about connections / (req/s), so p99 <= 60 ms at 50 connections")
        print("needs well over 833 req/s. Project figures for the reference (one core, wrk -c50):")
        print("GetTask 1371 (memory), 207 (SQLAlchemy Postgres); SendMessage 140 and 19.5.")
        for note in self.notes:
            print(f"note: {note}")
        print("\ncommands:")
        for command in self.commands:
            print(f"  {command}")
        for path in self.profiles:
            print_profile(path)


TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"}
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def print_profile(path: Path, top: int = 20) -> None:
    """Top functions of a py-spy raw profile: by own samples, and inclusive (libraries only)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines() if path.exists() else []:
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        names: dict[str, bool] = {}  # frame name -> is in a library of interest
        for frame in stack.split(";"):
            m = FRAME.match(frame)
            name = f"{m['func']} ({m['file'].rsplit('/', 1)[-1]})" if m else frame
            names[name] = m is not None and any(lib in m["file"] for lib in LIBS)
            names[name] &= m is not None and not m["file"].endswith(TRUNK)
        total += int(count)
        own[name] += int(count)  # the last frame: the leaf
        inclusive.update({frame: int(count) for frame, lib in names.items() if lib})
    print(f"\nprofile {path.stem}: {total} samples (py-spy 200 Hz, all threads, idle excluded)")
    for title, counter in (("own", own), ("inclusive, a2a/ours/drivers only", inclusive)):
        print(f"  top {top} by {title}:")
        for frame, n in counter.most_common(top):
            print(f"    {100 * n / max(total, 1):5.1f}%  {frame[:110]}")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--duration", type=int, default=10, help="seconds per measurement")
    p.add_argument("--warmup", type=int, default=2, help="seconds of unrecorded load before")
    p.add_argument("--connections", type=int, default=50)
    admin = "postgresql://root@127.0.0.1:5432/postgres"
    p.add_argument("--database-url", default=admin, help="admin URL; databases made beside it")
    p.add_argument("--port", type=int, default=8300, help="first port to use")
    p.add_argument("--server-core", default="0")
    p.add_argument("--load-core", default="1")
    p.add_argument("--no-reference-postgres", action="store_true")
    p.add_argument("--no-text-only", dest="text_only", action="store_false")
    p.add_argument("--ours-rev", help="measure this git revision of ours (default: work tree)")
    p.add_argument("--extra", default=EXTRA, help="venv with asyncpg for the reference")
    p.add_argument("--profile", action="store_true", help="py-spy each measurement (slows it)")
    p.add_argument("--py-spy", default=shutil.which("py-spy") or f"{EXTRA}/bin/py-spy")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    for tool, hint in (("wrk", "apt-get update && apt-get install -y wrk"), ("taskset", "")):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed: {hint or 'apt-get install -y util-linux'}")
            return 2
    if args.profile and not Path(args.py_spy).exists():
        print(f"--profile needs py-spy (not at {args.py_spy}): pip install py-spy in a venv")
        return 2

    def on_term(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    bench = Bench(args)
    try:
        print("measuring (each server alone on its core):")
        bench.measure_reference("memory")
        bench.measure_reference("memory", "httptools")  # ours serves with httptools
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
