"""Operator commands: `a2a-agent cluster` (the deployment's shape on one machine, without
containers) and `a2a-agent ping` (is this worker alive: its heartbeat in the database, for
a probe where a worker serves no HTTP)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

from a2a_agent.settings import Settings
from persistence.db import create_pool, read
from persistence.sql import q

SETTLE_S = 0.2


def run_cluster(settings: Settings, conninfo: str, *, apis: int, workers: int, port: int) -> int:
    """Start `apis` API processes (ports `port`, `port`+1, ...) and `workers` workers on one
    database, each under its own nanny with a stable executor id; stop them all on SIGTERM or
    Ctrl-C, or when one of them exits."""
    host = socket.gethostname()
    env = {**os.environ, "DATABASE_URL": conninfo}
    me = [sys.executable, "-m", "a2a_agent"]
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    for n in range(apis):
        name = f"{host}-api-{n + 1}"
        argv = [
            *me,
            "serve",
            "--no-worker",
            "--host",
            settings.server.host,
            "--port",
            str(port + n),
        ]
        children.append((name, subprocess.Popen([*argv, "--executor-id", name], env=env)))
    for n in range(workers):
        name = f"{host}-worker-{n + 1}"
        children.append((name, subprocess.Popen([*me, "worker", "--executor-id", name], env=env)))
    print(
        f"cluster: {apis} API process(es) on http://{settings.server.host}:{port}"
        + (f"..{port + apis - 1}" if apis > 1 else "")
        + f", {workers} worker(s), one database",
        flush=True,
    )
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    while not stopping:
        ended = [(name, child.returncode) for name, child in children if child.poll() is not None]
        if ended:
            name, code = ended[0]
            print(f"cluster: {name} exited with {code}; stopping the rest", file=sys.stderr)
            break
        time.sleep(SETTLE_S)
    for _, child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    for _, child in children:
        try:
            child.wait(settings.worker.shutdown_grace_s + 10)
        except subprocess.TimeoutExpired:
            child.kill()
    return code


async def ping(settings: Settings, conninfo: str) -> int:
    """0 if this executor's heartbeat is fresh, 1 if not (or the database is unreachable)."""
    pool = create_pool(conninfo, max_size=1)
    try:
        await pool.open(wait=True, timeout=10)
        async with read(pool) as conn:
            cur = await conn.execute(
                q("get_worker"),
                {
                    "executor_id": settings.worker.executor_id,
                    "timeout_s": settings.worker.heartbeat_timeout_s,
                },
            )
            row = await cur.fetchone()
    finally:
        await pool.close()
    if row is None:
        print(f"{settings.worker.executor_id}: no such worker", file=sys.stderr)
        return 1
    print(f"{settings.worker.executor_id}: {'alive' if row['fresh'] else 'stale'} ({row['role']})")
    return 0 if row["fresh"] else 1
