"""What an idle `a2a-agent serve` (API and worker, no task) costs: its process tree's CPU and
PostgreSQL's, per second, at the queue poll intervals given. A worker waits most of its life;
what it spends waiting is spent by every worker of a deployment (and every server a test
starts).

    .venv/bin/python bench/idle_cost.py [--polls 0.1,0.25,0.5,1] [--seconds 20]
        [--database-url URL]

Run from the repository root. Creates database a2a_bench_idle_<random> on the server (default:
the local one, trust auth), runs a real `a2a-agent serve` on it for each poll interval, and
drops the database at the end. PostgreSQL's CPU is every `postgres` process's on this host
(the postmaster's reaped children included), so run it on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# A benchmark measures the server as deployed: exec'd, not forked from the test suite's
# zygote (whose memory it would share, and whose PATH its git lookup would keep).
os.environ["A2A_TEST_EXEC"] = "1"
from bench.databases import bench_database
from bench.throughput import tree_cpu_s
from tests.support.processes import AgentProcess

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()


def postgres_cpu_s() -> float:
    """Every postgres process's CPU, with what the postmaster reaped of its children."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/comm") as f:
                if not f.read().startswith("postgres"):
                    continue
            fields = _stat(pid)
            with open(f"/proc/{fields[1]}/comm") as f:
                parent_is_postgres = f.read().startswith("postgres")
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
        if not parent_is_postgres:
            total += (int(fields[13]) + int(fields[14])) / TICK
    return total


def measure(url: str, poll: float, seconds: float) -> tuple[float, float]:
    home = Path(tempfile.mkdtemp(prefix="a2a-idle-"))
    server = AgentProcess(
        role="serve",
        database_url=url,
        home=home,
        executor_id=f"idle-{poll:g}",
        env={"A2A_AGENT_QUEUE_POLL_S": str(poll)},
    ).start()
    try:
        assert server.proc is not None
        time.sleep(3)  # past start-up
        ours0, pg0 = sum(tree_cpu_s(server.proc.pid).values()), postgres_cpu_s()
        time.sleep(seconds)
        ours1, pg1 = sum(tree_cpu_s(server.proc.pid).values()), postgres_cpu_s()
    finally:
        server.kill()
    return (ours1 - ours0) / seconds, (pg1 - pg0) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=DEFAULT_SERVER, help="server (admin) URL")
    parser.add_argument("--polls", default="0.1,0.25,0.5,1", help="queue poll intervals (s)")
    parser.add_argument("--seconds", type=float, default=20.0, help="idle time measured")
    args = parser.parse_args()
    with bench_database(args.database_url, "a2a_bench_idle") as url:
        print(f"idle `a2a-agent serve`, {args.seconds:g} s each; CPU in % of one core")
        print(f"  {'queue poll (s)':>14}  {'server tree':>11}  {'PostgreSQL':>10}")
        for poll in (float(p) for p in args.polls.split(",")):
            ours, pg = measure(url, poll, args.seconds)
            print(f"  {poll:>14g}  {100 * ours:>10.1f}%  {100 * pg:>9.1f}%")


if __name__ == "__main__":
    main()
