"""The connection pool and the one place psycopg errors become store errors.

Every psycopg error raised while a pooled connection is in use is translated here: a caller
above `persistence/` sees only `persistence.errors`, with a message of our own. The driver's
text goes to the log, never into an error that could reach a caller or a task's status.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from persistence.errors import Conflict, InvalidData, StoreError, StoreUnavailable

log = logging.getLogger(__name__)

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


@contextmanager
def translated(what: str = "the database call") -> Iterator[None]:
    """Turn any driver error raised inside into a StoreError subclass (the driver's text is
    logged, not carried). Also for code that holds a connection of its own (migrate, LISTEN)."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        log.info("%s: integrity error: %s", what, exc)
        raise Conflict("the change conflicts with what is stored; read the task again") from exc
    except (psycopg.errors.DataError, psycopg.errors.ProgramLimitExceeded) as exc:
        log.warning("%s: data error: %s", what, exc)
        raise InvalidData("the database refused a value (invalid or too large)") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        log.warning("%s: database unavailable: %s", what, exc)
        raise StoreUnavailable("the database is unavailable") from exc
    except UnicodeEncodeError as exc:
        # Raised by the driver's dumper, before a byte is sent: text with a lone surrogate
        # (JSON's "\ud800" decodes to one), which UTF-8, and so PostgreSQL, cannot carry.
        log.info("%s: text the database cannot take: %s", what, exc)
        raise InvalidData("a value holds text that is not Unicode (a lone surrogate)") from exc
    except psycopg.Error as exc:
        log.error("%s failed: %s", what, exc)
        raise StoreError("a database operation failed; see the server log") from exc
    except TimeoutError as exc:  # pool checkout timed out: the database is down or saturated
        raise StoreUnavailable("no database connection available") from exc


@asynccontextmanager
async def read(pool: Pool, *, timeout_s: float | None = None) -> AsyncIterator[Conn]:
    """A pooled connection for reads (autocommit: each statement is its own snapshot)."""
    with translated("a read"):
        async with pool.connection(timeout=timeout_s) as conn:
            yield conn


@asynccontextmanager
async def transaction(pool: Pool, *, timeout_s: float | None = None) -> AsyncIterator[Conn]:
    """One transaction on a pooled connection; driver errors are translated here."""
    with translated("a transaction"):
        async with pool.connection(timeout=timeout_s) as conn, conn.transaction():
            yield conn
