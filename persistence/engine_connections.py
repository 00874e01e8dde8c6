"""Connections for the engine's (DBOS's) own database access, made so it can ride out an outage.

DBOS 3.4 retries a database call whose connection could not be made only when psycopg's
message says "connection failed". psycopg 3.3 words a refused connection or a missing socket
(what a database restart looks like) "connection is bad: ...", which DBOS took for a real
error: a step's bookkeeping failed mid-run and the run stayed `working` (seen in
tests/test_outage.py under load). This factory, given to DBOS's SQLAlchemy engine as its
`creator`, says "connection failed" for every failure to connect, so DBOS waits the outage out.

Its sessions also end a transaction left idle longer than a worker may go silent before
others take its runs over (`idle_in_transaction_s`: the heartbeat timeout). DBOS records a
step in a transaction that locks the workflow's row; a worker frozen inside it (a VM stall,
SIGSTOP) held that lock, and the takeover of its runs waited on it for as long as the freeze
lasted (`tests/test_crash.py`, the slow worker, failed so under load). DBOS reruns such a
transaction when the worker comes back (SQLSTATE 25P03 is retriable to it).
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

from persistence.sql import q

CONNECT_TIMEOUT_S = 10


def engine_connection_factory(
    conninfo: str, idle_in_transaction_s: float | None = None
) -> Callable[[], psycopg.Connection[tuple[object, ...]]]:
    def connect() -> psycopg.Connection[tuple[object, ...]]:
        try:
            conn = psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            if "connection failed" in str(exc):
                raise
            raise psycopg.OperationalError(f"connection failed: {exc}") from exc
        if idle_in_transaction_s is not None:
            ms = max(1, round(idle_in_transaction_s * 1000))
            conn.execute(q("engine_idle_in_transaction"), {"ms": str(ms)})
            conn.commit()
        return conn

    return connect
