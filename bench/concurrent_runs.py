"""Many model-worked runs at once on one worker: makespan against one run alone, and what each
run costs the worker (issue 25).

One `a2a-agent serve` (API and worker in one process, its defaults unless told) on a fresh
database; the model is the fake Messages API over HTTP, answering every call after
`--latency` seconds. Each task is a plan of `--items` model-worked items; for each item the
model calls bash once (a short command in the sandbox) and then ends its turn, so a run makes
2 x items model calls. First one run alone, then N runs sent at once, for each N.

Prints, per N: the makespan and its ratio to one run alone; the most model calls in flight;
the server's CPU per run (its process and the commands it ran; in brackets its Python
processes' own, without the commands and git) and PostgreSQL's; step
overhead p50/p99 (a step's time outside the model: every step's duration, less the model's
latency for the model's calls and the command's time, from the effects' completion times; and
after the table, each kind of step's); the worker's RSS before and at
its peak, and its growth per active run; the most database connections held; how busy the
whole machine was meanwhile (/proc/stat), and what of it was this script (the fake model) and
the rest per run (the server, PostgreSQL and the kernel's work for the commands' boxes, which
no process is charged for). Asserts nothing.

With `--workers K`, K - 1 `a2a-agent worker` processes (each with a home of its own, as on
other machines) share the database with the `serve`: it prints how the runs were split
between the executors and whether any was worked twice (an effect run more than once, a
model call beyond the plan's), and CPU and RSS are those of all K.

    .venv/bin/python bench/concurrent_runs.py                      # N = 10 100 500 1000
    .venv/bin/python bench/concurrent_runs.py --n 10 100 --latency 2 --items 2
    .venv/bin/python bench/concurrent_runs.py --n 100 --workers 2

Targets (issue 25): at N = 500 the makespan within 1.25x of one run alone plus the CPU spread
over the cores; server CPU per two-item run <= 0.08 s; step overhead p99 <= 50 ms; RSS <= 2 MB
per active run; connections bounded by the pool.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
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
from tests.support.fake_anthropic import JSON, FakeAnthropic, text_reply, tool_reply  # noqa: E402

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
TICKS = os.sysconf("SC_CLK_TCK")


def responder(latency: float) -> Any:
    """The model: bash once per item (its own file), then the end of the turn."""

    def answer(body: JSON) -> JSON:
        last = body["messages"][-1]
        content = last.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return text_reply("Done.", delay=latency)
        command = 'echo "$A2A_IDEMPOTENCY_KEY" > "done-$A2A_ITEM_ID.txt"'
        return tool_reply("bash", {"command": command}, delay=latency)

    return answer


def plan(n: int, items: int) -> dict[str, Any]:
    return {
        "configuration": {"returnImmediately": True},
        "message": {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"plan": {
                "goal": f"concurrent task {n}",
                "items": [
                    {"id": f"i{k}", "title": f"Write done-i{k}.txt",
                     "verify": f"test -f done-i{k}.txt", "precheck": False}
                    for k in range(items)
                ],
            }}}],
        },
    }  # fmt: skip


def _stat(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_s(pid: int) -> float:
    """A process's CPU seconds, its reaped children's included (the commands it ran)."""
    return sum(int(f) for f in _stat(pid)[11:15]) / TICKS


def own_cpu_s(pid: int) -> float:
    """A process's own CPU seconds, without its children's."""
    return sum(int(f) for f in _stat(pid)[11:13]) / TICKS


def session(sid: int) -> list[int]:
    """The processes of a session: the server's supervisor, the server, their children."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                if int(_stat(int(entry.name))[3]) == sid:
                    found.append(int(entry.name))
    return found


def python_own_cpu_s(sid: int) -> float:
    """The session's Python processes' own CPU seconds (the server, its nanny and deliverer),
    without the commands and git they ran."""
    total = 0.0
    for pid in session(sid):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().startswith(("python", "a2a-agent")):
                total += own_cpu_s(pid)
    return total


def session_cpu_s(sid: int) -> float:
    total = 0.0
    for pid in session(sid):
        with contextlib.suppress(OSError):
            total += cpu_s(pid)
    return total


def postgres_cpu_s() -> float:
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if (entry / "comm").read_text().strip() == "postgres":
                    total += cpu_s(int(entry.name))
    return total


def machine_busy() -> tuple[float, float]:
    """The machine's busy and total CPU seconds so far, every process's (/proc/stat)."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / TICKS, sum(fields) / TICKS


def rss_mb(sid: int) -> float:
    """The resident memory of the session's Python processes (not the commands' boxes)."""
    total = 0.0
    for pid in session(sid):
        with contextlib.suppress(OSError):
            if not Path(f"/proc/{pid}/comm").read_text().startswith("python"):
                continue
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


class Sampler:
    """Samples the worker's RSS and the database's connections while runs go on."""

    def __init__(self, pids: list[int], database: str, dbname: str) -> None:
        self.pids, self.database, self.dbname = pids, database, dbname
        self.peak_rss = 0.0
        self.peak_connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.database, autocommit=True) as conn:
            while not self._stop.wait(0.2):
                self.peak_rss = max(self.peak_rss, sum(map(rss_mb, self.pids)))
                (held,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                    "pg_backend_pid()",
                    (self.dbname,),
                ).fetchone() or (0,)
                self.peak_connections = max(self.peak_connections, int(held))


def rpc(client: httpx.Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = client.post("/", json=body).json()
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return dict(reply["result"])


def send_all(url: str, messages: list[dict[str, Any]]) -> list[str]:
    """Sent side by side (16 connections), as an orchestrator fanning out would."""
    ids: list[str] = [""] * len(messages)
    lock = threading.Lock()
    queue = list(enumerate(messages))

    def sender() -> None:
        with httpx.Client(base_url=url, headers={"A2A-Version": "1.0"}, timeout=120) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    n, message = queue.pop()
                ids[n] = rpc(client, "SendMessage", message)["task"]["id"]

    threads = [threading.Thread(target=sender) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids


def wait_done(database: str, ids: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(database, autocommit=True) as conn:
        while True:
            rows = conn.execute(
                "SELECT state, count(*) FROM tasks WHERE id = ANY(%s) GROUP BY state", (ids,)
            ).fetchall()
            states = dict(rows)
            ended = sum(v for k, v in states.items() if k in ("completed", "failed", "canceled"))
            if ended == len(ids):
                if states.get("completed", 0) != len(ids):
                    raise RuntimeError(f"not every run completed: {states}")
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"unfinished after {timeout} s: {states}")
            time.sleep(0.05)


def step_overheads(database: str, ids: list[str], latency: float) -> list[tuple[str, float]]:
    """Each step's time outside the model and the command, in ms: from the task's record
    before it to its own (a run that resumes from rows leaves no engine record of its
    steps), less the model's latency for a model call and the command's time where the
    record holds it."""
    with psycopg.connect(database, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT step, since_ms, command_s FROM ("
            "  SELECT step, (result->'command'->>'duration_s')::float8 AS command_s,"
            "    extract(epoch FROM completed_at - lag(completed_at)"
            "      OVER (PARTITION BY task_id ORDER BY completed_at)) * 1000 AS since_ms"
            "  FROM effects WHERE task_id = ANY(%s) AND status = 'completed') AS steps "
            "WHERE since_ms IS NOT NULL",
            (ids,),
        ).fetchall()
    return [
        (
            str(step),
            float(ms) - (latency * 1000 if step == "model" else 0.0) - float(command or 0) * 1000,
        )
        for step, ms, command in rows
    ]


def by_step(overheads: list[tuple[str, float]]) -> str:
    """p50 / p99 ms (count) of each kind of step, the slowest at p99 first."""
    kinds: dict[str, list[float]] = {}
    for step, ms in overheads:
        kinds.setdefault(step, []).append(ms)
    ranked = sorted(kinds.items(), key=lambda kv: -percentile(kv[1], 0.99))
    return ", ".join(
        f"{step} {statistics.median(v):.0f} / {percentile(v, 0.99):.0f} ({len(v)})"
        for step, v in ranked
    )


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else 0.0


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group; SIGKILL if it is still there after a minute."""
    for sig, grace in ((signal.SIGTERM, 60.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
            return


def start(role: str, env: dict[str, str], home: Path, *args: str) -> subprocess.Popen[bytes]:
    log = (home / f"{role}.log").open("wb")
    with log:
        return subprocess.Popen(
            [sys.executable, "-m", "a2a_agent", role, *args],
            env=env, cwd=home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip


def split(database: str, ids: list[str], calls: int) -> str:
    """How the runs' segments were split between executors, and what was done twice: an
    effect run more than once, model calls beyond the plans' (`calls`)."""
    with psycopg.connect(database, autocommit=True) as conn:
        by = conn.execute(
            "SELECT executor_id, count(*) FROM dbos.workflow_status "
            "WHERE split_part(workflow_uuid, ':', 1) = ANY(%s) GROUP BY 1 ORDER BY 1",
            (ids,),
        ).fetchall()
        (twice,) = conn.execute(
            "SELECT count(*) FROM effects WHERE task_id = ANY(%s) AND runs > 1", (ids,)
        ).fetchone() or (0,)
        (made,) = conn.execute(
            "SELECT count(*) FROM model_calls WHERE task_id = ANY(%s)", (ids,)
        ).fetchone() or (0,)
    shares = ", ".join(f"{executor} {count}" for executor, count in by)
    return f"{shares}; effects run twice {twice}; model calls {made} of {calls}"


def measure(
    args: argparse.Namespace, server_url: str, fake: FakeAnthropic, n: int, index: int
) -> dict[str, Any]:
    name = f"a2a_bench_many_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    database = make_conninfo(server_url, dbname=name)
    home = Path(tempfile.mkdtemp(prefix="a2a-many-"))
    port = args.port + index
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "A2A_AGENT_HOME": str(home),
        "A2A_AGENT_INSECURE_OPEN": "1",
        "A2A_AGENT_BUDGET_PAUSE": "off",
        "ANTHROPIC_API_KEY": "sk-ant-bench-0000000000000000",
        "ANTHROPIC_BASE_URL": fake.base_url,
        "PYTHONPATH": str(REPO),
        **dict(kv.split("=", 1) for kv in args.env),
    }
    proc = start("serve", {**env, "A2A_AGENT_EXECUTOR_ID": "serve-1"}, home, "--port", str(port))
    procs = [proc]
    homes = [home]
    url = f"http://127.0.0.1:{port}"
    try:
        for k in range(2, args.workers + 1):  # more workers, each as on a machine of its own
            homes.append(Path(tempfile.mkdtemp(prefix="a2a-many-")))
            worker_env = {**env, "A2A_AGENT_HOME": str(homes[-1])}
            procs.append(start("worker", {**worker_env, "A2A_AGENT_EXECUTOR_ID": f"worker-{k}"},
                               homes[-1]))  # fmt: skip
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError((home / "serve.log").read_text()[-3000:])
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the server never became ready")
            time.sleep(0.2)
        time.sleep(1)
        # One run alone, as the ideal each of the N would have.
        started = time.monotonic()
        alone_ids = send_all(url, [plan(-1, args.items)])
        wait_done(database, alone_ids, args.timeout)
        alone = time.monotonic() - started
        idle_rss = sum(rss_mb(p.pid) for p in procs)
        cpu0, pg0 = sum(session_cpu_s(p.pid) for p in procs), postgres_cpu_s()
        own0 = sum(python_own_cpu_s(p.pid) for p in procs)
        fake.max_in_flight = 0
        spy = None
        if args.profile:  # where the server's CPU goes while the N runs go on (py-spy)
            spy = subprocess.Popen(
                ["py-spy", "record", "--pid", str(proc.pid), "--subprocesses", "--nonblocking",
                 "--format", "raw", "--rate", "200", "--gil", "-o", f"{args.profile}.{n}.txt"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            time.sleep(1)
        with Sampler([p.pid for p in procs], database, name) as sampler:
            busy0, mine0 = machine_busy(), time.process_time()
            started = time.monotonic()
            ids = send_all(url, [plan(k, args.items) for k in range(n)])
            sent = time.monotonic() - started
            wait_done(database, ids, args.timeout)
            makespan = time.monotonic() - started
            busy1, mine = machine_busy(), time.process_time() - mine0
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
        cpu = sum(session_cpu_s(p.pid) for p in procs) - cpu0
        own = sum(python_own_cpu_s(p.pid) for p in procs) - own0
        pg = postgres_cpu_s() - pg0
        steps = step_overheads(database, ids, args.latency)
        overheads = [ms for _, ms in steps]
        shares = split(database, ids, n * args.items * 2)
    finally:
        for p in procs:
            stop(p)
        for h in homes:
            shutil.rmtree(h, ignore_errors=True)
        if args.keep:
            print(f"kept database {name}", flush=True)
        else:
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
    cores = os.cpu_count() or 1
    return {
        "n": n,
        "alone": alone,
        "sent": sent,
        "makespan": makespan,
        "ratio": makespan / alone,
        "bound": 1.25 * alone + (cpu + pg) / cores,
        "in_flight": fake.max_in_flight,
        "cpu_per_run": cpu / n,
        "own_per_run": own / n,
        "pg_per_run": pg / n,
        "p50": statistics.median(overheads) if overheads else 0.0,
        "p99": percentile(overheads, 0.99),
        "idle_rss": idle_rss,
        "peak_rss": sampler.peak_rss,
        "rss_per_run": max(0.0, sampler.peak_rss - idle_rss) / n,
        "connections": sampler.peak_connections,
        "split": shares,
        "by_step": by_step(steps),
        "busy": (busy1[0] - busy0[0]) / max(1e-9, busy1[1] - busy0[1]),
        "fake_per_run": mine / n,
        # Everything the machine did for the runs but this script (the fake model): the
        # server, PostgreSQL, and the kernel's work for the boxes no process is charged for.
        "machine_per_run": max(0.0, busy1[0] - busy0[0] - mine) / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=DEFAULT_SERVER)
    parser.add_argument("--n", type=int, nargs="+", default=[10, 100, 500, 1000])
    parser.add_argument("--items", type=int, default=2)
    parser.add_argument("--latency", type=float, default=2.0, help="seconds per model call")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--port", type=int, default=18500)
    parser.add_argument("--keep", action="store_true", help="keep each N's database")
    parser.add_argument("--workers", type=int, default=1, help="the serve and K - 1 workers")
    parser.add_argument("--profile", metavar="PREFIX", help="py-spy the server to PREFIX.N.txt")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="for the server"
    )
    args = parser.parse_args()
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(
        f"plans of {args.items} model-worked item(s), each one bash call and an end of turn; "
        f"model latency {args.latency} s; {os.cpu_count()} cores; server env {args.env or '-'}; "
        f"{args.workers} worker process(es)"
    )
    print(
        "\n| N | alone s | makespan s (sent in) | x alone | bound s | calls in flight | "
        "CPU/run s (+PG) [serving process] | step p50 / p99 ms | RSS MB idle / peak (per run) "
        "| connections | machine busy |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    splits: list[str] = []
    kinds: list[str] = []
    with FakeAnthropic([]) as fake:
        answer = responder(args.latency)
        for index, n in enumerate(args.n):
            fake.add(*[answer] * (n + 1) * args.items * 2 * 2)
            r = measure(args, args.server, fake, n, index)
            print(
                f"| {n} | {r['alone']:.2f} | {r['makespan']:.2f} ({r['sent']:.2f}) | "
                f"{r['ratio']:.2f}x | {r['bound']:.2f} | {r['in_flight']:.0f} | "
                f"{r['cpu_per_run']:.3f} (+{r['pg_per_run']:.3f}) [{r['own_per_run']:.3f}] | "
                f"{r['p50']:.1f} / {r['p99']:.1f} | {r['idle_rss']:.0f} / {r['peak_rss']:.0f} "
                f"({r['rss_per_run']:.2f}) | {r['connections']:.0f} | {r['busy']:.0%} "
                f"(this script {r['fake_per_run']:.3f} s/run; the rest "
                f"{r['machine_per_run']:.3f} s/run) |",
                flush=True,
            )
            splits.append(f"N = {n}: {r['split']}")
            kinds.append(f"N = {n}: {r['by_step']}")
    print("\nStep overhead by kind of step, p50 / p99 ms (count), the slowest at p99 first:")
    print("\n".join(f"- {line}" for line in kinds))
    print("\nRuns (segments) per executor, and what was done twice:")
    print("\n".join(f"- {line}" for line in splits))


if __name__ == "__main__":
    main()
