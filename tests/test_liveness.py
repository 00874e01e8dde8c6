"""A worker's liveness probe (`a2a-agent ping --alive`) answers from the process's own loop,
never from the database: a hung process fails it, a database that is away does not."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.support.processes import REPO, StartAgent


def ping_alive(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2a_agent", "ping", "--alive", *extra],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_alive_follows_the_loop_not_the_database(start_agent: StartAgent) -> None:
    worker = start_agent("worker", "alive-1", A2A_AGENT_HEARTBEAT_TIMEOUT_S="1.5")
    env = {**worker.env, "A2A_AGENT_EXECUTOR_ID": "alive-1"}
    deadline = time.monotonic() + 20
    while ping_alive(env, "--max-age", "3").returncode != 0:
        assert time.monotonic() < deadline, "never marked alive"
        time.sleep(0.2)
    # No database needed to answer: not even a reachable address.
    away = {**env, "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    assert ping_alive(away, "--max-age", "3").returncode == 0
    # A process that stops running its loop stops being alive (the nanny and its children
    # are one process group).
    assert worker.proc is not None
    os.killpg(worker.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(4)
        stale = ping_alive(env, "--max-age", "3")
        assert stale.returncode == 1 and "last marked alive" in stale.stderr
    finally:
        os.killpg(worker.proc.pid, signal.SIGCONT)
    deadline = time.monotonic() + 20
    while ping_alive(env, "--max-age", "3").returncode != 0:
        assert time.monotonic() < deadline, "alive again after SIGCONT"
        time.sleep(0.2)
    assert ping_alive({**env, "A2A_AGENT_EXECUTOR_ID": "nobody"}).returncode == 1
