"""What one bubblewrap box costs the machine, against what its processes are charged.

Runs `/bin/true` N times in each of: a plain exec, then bwrap with the harness's flags added
one group at a time, ending with the box every command and harness git call runs in
(`Sandbox.wrap`). For each it prints the CPU charged to the children (what a process's
accounting, and so `concurrent_runs.py`'s "CPU per run", sees), the machine's busy CPU from
/proc/stat less what it does idle (the kernel's namespace and mount work included, which no
process is charged for), and the wall time. Asserts nothing.

    .venv/bin/python bench/box_cost.py [--n 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from a2a_agent.harness.workspace.sandbox import Sandbox  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
SETTLE_S = 2.0  # the kernel tears namespaces down after the process is gone


def machine_busy_s() -> float:
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS  # all but idle and iowait


def children_s() -> float:
    times = os.times()
    return times.children_user + times.children_system


def variants(workspace: Path) -> dict[str, list[str]]:
    true = ["/bin/true"]
    fs = ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    ns = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    return {
        "plain exec": true,
        "bwrap --ro-bind / /": ["bwrap", "--ro-bind", "/", "/", "--", *true],
        "+ /proc /dev /tmp": ["bwrap", *fs, "--", *true],
        "+ pid namespace": ["bwrap", "--unshare-pid", *fs, "--", *true],
        "+ ipc uts cgroup": ["bwrap", *ns, *fs, "--", *true],
        "+ network namespace": ["bwrap", *ns, "--unshare-net", *fs, "--", *true],
        "the harness's box (Sandbox.wrap)": Sandbox().wrap(true, workspace),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="boxes per variant")
    args = parser.parse_args()
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    before = machine_busy_s()
    time.sleep(3)
    idle = (machine_busy_s() - before) / 3
    print(f"idle machine: {idle * 1000:.1f} ms of CPU a second; {os.cpu_count()} cores")
    print(
        "\n| variant | charged to the children, ms | the machine, ms | wall, ms |\n"
        "| --- | --- | --- | --- |"
    )
    with tempfile.TemporaryDirectory(prefix="a2a-box-") as scratch:
        for name, argv in variants(Path(scratch)).items():
            busy0, charged0, started = machine_busy_s(), children_s(), time.monotonic()
            for _ in range(args.n):
                subprocess.run(argv, check=True, cwd=scratch)
            wall = time.monotonic() - started
            time.sleep(SETTLE_S)
            machine = machine_busy_s() - busy0 - idle * (wall + SETTLE_S)
            charged = children_s() - charged0
            print(
                f"| {name} | {charged / args.n * 1000:.2f} | {machine / args.n * 1000:.2f} | "
                f"{wall / args.n * 1000:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
