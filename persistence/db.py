"""The connection pool and the one place psycopg errors become store errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from persistence.errors import Conflict, StoreUnavailable

Conn = psycopg.AsyncConnection[dict[str, Any]]
Pool = AsyncConnectionPool[Conn]


def create_pool(conninfo: str, *, max_size: int = 10) -> Pool:
    """A pool that is opened by the app's lifespan and survives database restarts."""
    return AsyncConnectionPool(
        conninfo,
        min_size=min(2, max_size),
        max_size=max_size,
        open=False,
        # Autocommit, so a read is one round trip; writes open their transaction explicitly.
        # No check on checkout (it costs a round trip per request): a connection broken by a
        # database restart fails one call, which is retried, and the pool replaces it.
        kwargs={"row_factory": dict_row, "autocommit": True},
        reconnect_timeout=24 * 3600,
        timeout=10,
    )


@asynccontextmanager
async def read(pool: Pool, *, timeout_s: float | None = None) -> AsyncIterator[Conn]:
    """A pooled connection for one read statement (autocommit: no BEGIN/COMMIT)."""
    try:
        async with pool.connection(timeout=timeout_s) as conn:
            yield conn
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"database unavailable: {str(exc).strip()}") from exc
    except TimeoutError as exc:
        raise StoreUnavailable("no database connection available") from exc


@asynccontextmanager
async def transaction(pool: Pool, *, timeout_s: float | None = None) -> AsyncIterator[Conn]:
    """One transaction on a pooled connection; driver errors are translated here."""
    try:
        async with pool.connection(timeout=timeout_s) as conn, conn.transaction():
            yield conn
    except psycopg.errors.IntegrityError as exc:
        raise Conflict(str(exc).strip()) from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        raise StoreUnavailable(f"database unavailable: {str(exc).strip()}") from exc
    except TimeoutError as exc:  # pool checkout timed out: the database is down or saturated
        raise StoreUnavailable("no database connection available") from exc
