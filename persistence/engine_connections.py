"""Connections for the engine's (DBOS's) own database access, made so it can ride out an outage.

DBOS 3.4 retries a database call whose connection could not be made only when psycopg's
message says "connection failed". psycopg 3.3 words a refused connection or a missing socket
(what a database restart looks like) "connection is bad: ...", which DBOS took for a real
error: a step's bookkeeping failed mid-run and the run stayed `working` (seen in
tests/test_outage.py under load). This factory, given to DBOS's SQLAlchemy engine as its
`creator`, says "connection failed" for every failure to connect, so DBOS waits the outage out.
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg

CONNECT_TIMEOUT_S = 10


def engine_connection_factory(
    conninfo: str,
) -> Callable[[], psycopg.Connection[tuple[object, ...]]]:
    def connect() -> psycopg.Connection[tuple[object, ...]]:
        try:
            return psycopg.connect(conninfo, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            if "connection failed" in str(exc):
                raise
            raise psycopg.OperationalError(f"connection failed: {exc}") from exc

    return connect
