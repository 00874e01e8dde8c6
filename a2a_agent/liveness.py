"""Is this process alive, whatever the database does: the supervisor's loop touches a file in
the home at every beat, before any database work, and `a2a-agent ping --alive` reads its age.
A liveness probe on it restarts a hung process but not one waiting out a database failover
(the readiness probe, `a2a-agent ping`, reads the heartbeat in the database)."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def alive_path(home: Path, executor_id: str) -> Path:
    return home / "alive" / executor_id.replace("/", "_")


def mark_alive(home: Path, executor_id: str) -> None:
    path = alive_path(home, executor_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()


def check_alive(home: Path, executor_id: str, max_age_s: float) -> int:
    """0 if the process marked itself alive within `max_age_s`, else 1 (a probe's answer)."""
    path = alive_path(home, executor_id)
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        print(f"{executor_id}: not marked alive ({path} is missing)", file=sys.stderr)
        return 1
    if age > max_age_s:
        print(f"{executor_id}: last marked alive {age:.0f} s ago", file=sys.stderr)
        return 1
    print(f"{executor_id}: alive ({age:.1f} s ago)")
    return 0
