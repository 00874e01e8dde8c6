"""Drop one test run's databases, after the run: `python -m tests.support.drop_databases
ADMIN_URL PREFIX`, started detached by the test session's last hook (`tests/conftest.py`).

Every DROP DATABASE makes PostgreSQL take an immediate checkpoint and wait for it. Dropped at
each test process's end (a few hundred each, four at a time) they held every process 6-16 s
past its last test, on the run's critical path, while the four drop queues' checkpoints
flushed each other's writes. Here they go side by side, so one checkpoint serves many waiting
drops, and nobody waits for them."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import psycopg
from psycopg import sql

SIDE_BY_SIDE = 8  # drops waiting on one checkpoint together; connections stay few


def _drop(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def main(admin_url: str, prefix: str) -> int:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,)
            )
        ]
    with ThreadPoolExecutor(max_workers=SIDE_BY_SIDE) as pool:
        list(pool.map(lambda name: _drop(admin_url, name), names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
