"""What waiting for a child costs the process that started it: asyncio's default on Python
3.11 (a thread per child blocked in `waitpid`) against `LoopReaper` (the child's pidfd on the
loop that started it, a2a_agent/harness/workspace/reaping.py), side by side in one run.

Each spawn is what the harness does for a command or a git call: `create_subprocess_exec`
with pipes, then `communicate()`. Prints the parent's CPU (all its threads) and the wall time
per spawn, one at a time and eight at once, for each watcher in turn, alternating. Asserts
nothing.

    .venv/bin/python bench/spawn_cost.py [--n 400] [--rounds 2] [--program /bin/true]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from a2a_agent.harness.workspace.reaping import reap_on_loops


def use(watcher: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(None)  # type: ignore[arg-type]  # None: asyncio's default
    if watcher == "pidfd" and not reap_on_loops():
        raise SystemExit("no pidfds here (Linux 5.3 and Python 3.11 needed)")


async def spawn(program: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        program,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await proc.communicate()


async def measure(program: str, n: int, at_once: int) -> tuple[float, float]:
    """Parent CPU and wall ms a spawn, over n spawns, at_once of them in flight."""
    for _ in range(20):  # warm up: imports, the first pipes
        await spawn(program)
    gate = asyncio.Semaphore(at_once)

    async def one() -> None:
        async with gate:
            await spawn(program)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return (time.process_time() - cpu) * 1000 / n, (time.perf_counter() - wall) * 1000 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--program", default="/bin/true")
    args = parser.parse_args()
    if sys.version_info >= (3, 12):
        raise SystemExit("Python 3.12 and later wait on pidfds per loop themselves")
    rows: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for watcher in ("thread", "pidfd"):
            use(watcher)
            for at_once in (1, 8):
                found = asyncio.run(measure(args.program, args.n, at_once))
                rows.setdefault((watcher, at_once), []).append(found)
    use("thread")
    print(f"$ python bench/spawn_cost.py --n {args.n} --rounds {args.rounds}")
    print(f"{args.n} spawns of {args.program} a measurement, {args.rounds} round(s) alternating\n")
    print("| watcher | at once | parent CPU ms a spawn | wall ms a spawn |")
    print("| --- | --- | --- | --- |")
    for (watcher, at_once), measured in rows.items():
        name = "a thread each (asyncio)" if watcher == "thread" else "pidfd (LoopReaper)"
        cpu = " / ".join(f"{c:.2f}" for c, _ in measured)
        wall = " / ".join(f"{w:.2f}" for _, w in measured)
        print(f"| {name} | {at_once} | {cpu} | {wall} |")


if __name__ == "__main__":
    main()
