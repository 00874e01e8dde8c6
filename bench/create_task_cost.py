"""PostgreSQL's CPU per submission: `create_task()` alone, on one connection, sends one after
another (no HTTP, no server), measured on the backend process (/proc), with the time each SQL
function took (`track_functions`).

    .venv/bin/python bench/create_task_cost.py [--sends 2000] [--items 1 10] [--rev REV]

Run from the repository root; creates database a2a_bench_create_<random> on the server
(default: the local one, trust auth as root) and drops it at the end. `--rev` measures the
SQL and store of another revision (a `git worktree` of it), for before and after in one run.
This machine's speed moves by a third within minutes: compare runs made one after the other.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SERVER = "postgresql://root@127.0.0.1:5432/postgres"
TICK = os.sysconf("SC_CLK_TCK")
WARMUP = 200


def backend_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def measure(url: str, sends: int, items: int) -> dict[str, Any]:
    from persistence.db import create_pool, read  # noqa: PLC0415  (the revision's own)
    from persistence.migrate import migrate  # noqa: PLC0415
    from persistence.tasks import PostgresTaskStore  # noqa: PLC0415
    from tests.persistence.rows import new_task  # noqa: PLC0415

    await migrate(url)
    pool = create_pool(url, max_size=1)
    await pool.open(wait=True)
    try:
        store = PostgresTaskStore(pool)
        async with read(pool) as conn:
            cur = await conn.execute("SELECT pg_backend_pid() AS pid")
            pid = (await cur.fetchone() or {})["pid"]
        for _ in range(WARMUP):
            await store.create_task(new_task(items))
        cpu0, wall0 = backend_cpu_s(pid), time.perf_counter()
        for _ in range(sends):
            await store.create_task(new_task(items))
        cpu1, wall1 = backend_cpu_s(pid), time.perf_counter()
        async with read(pool) as conn:
            await conn.execute("SELECT pg_stat_force_next_flush()")
        await asyncio.sleep(1)  # the statistics are written at the end of the statement
        async with read(pool) as conn:
            cur = await conn.execute(
                "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions "
                "ORDER BY total_time DESC"
            )
            functions = await cur.fetchall()
    finally:
        await pool.close()
    return {
        "pg_ms": 1000 * (cpu1 - cpu0) / sends,
        "wall_ms": 1000 * (wall1 - wall0) / sends,
        "functions": functions,
    }


def child(args: argparse.Namespace) -> None:
    """Runs in a process whose imports are the measured revision's."""
    name = f"a2a_bench_create_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.database_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        conn.execute(
            sql.SQL("ALTER DATABASE {} SET track_functions = 'pl'").format(sql.Identifier(name))
        )
    try:
        result = asyncio.run(
            measure(make_conninfo(args.database_url, dbname=name), args.sends, args.items[0])
        )
    finally:
        with psycopg.connect(args.database_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    print(
        f"  {args.items[0]:>3} item(s): PostgreSQL {result['pg_ms']:.3f} ms of CPU a send, "
        f"{result['wall_ms']:.3f} ms a send end to end"
    )
    for f in result["functions"]:
        calls = max(1, f["calls"])
        print(
            f"      {f['funcname']:<22} {f['calls']:>6} calls  total {f['total_time'] / calls:.3f}"
            f"  self {f['self_time'] / calls:.3f} ms a call"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--database-url", default=DEFAULT_SERVER, help="server (admin) URL")
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--items", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--rev", help="measure this revision (default: this checkout)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, os.getcwd())
        child(args)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        where = REPO
        if args.rev:
            where = Path(tmp) / "rev"
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "add", "--detach", "-q", str(where), args.rev],
                check=True,
            )
        try:
            print(f"create_task(), {args.sends} sends on one connection, at {args.rev or 'HEAD+'}:")
            for items in args.items:
                subprocess.run(
                    [sys.executable, str(Path(__file__).resolve()), "--child", "--sends",
                     str(args.sends), "--items", str(items), "--database-url", args.database_url],
                    cwd=where, check=True,
                )  # fmt: skip
        finally:
            if args.rev:
                subprocess.run(
                    ["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)],
                    check=False,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
