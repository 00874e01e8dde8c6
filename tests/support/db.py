"""The tests' own reads of a server's database, on one connection per database and thread.

A new connection costs PostgreSQL about 6 ms of CPU (a backend's start and its first catalog
reads), against 0.03 ms for a query on an open one, and the tests poll: the kill storm alone
opened about 4,000 connections, most of the suite's waits one every 50-200 ms. The connections
are autocommit (each statement its own transaction, as each `with psycopg.connect` was) and
closed after every test (`close_all`, from an autouse fixture), so none outlives its test's
database or counts against PostgreSQL's 100 clients between tests.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg

_local = threading.local()
_all: list[psycopg.Connection[Any]] = []
_lock = threading.Lock()


def connection(url: str) -> psycopg.Connection[Any]:
    cached: dict[str, psycopg.Connection[Any]] = _local.__dict__.setdefault("by_url", {})
    conn = cached.get(url)
    if conn is None or conn.closed or conn.broken:
        conn = psycopg.connect(url, autocommit=True)
        cached[url] = conn
        with _lock:
            _all.append(conn)
    return conn


def rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """The rows of one statement (its parameters positional)."""
    try:
        return connection(url).execute(sql, args).fetchall()
    except psycopg.OperationalError:
        # The server went away under the connection (a test restarting PostgreSQL's proxy,
        # a database dropped and made again): once more on a new one.
        return connection(url).execute(sql, args).fetchall()


def close_all() -> None:
    with _lock:
        conns, _all[:] = list(_all), []
    for conn in conns:
        conn.close()
    _local.__dict__.pop("by_url", None)
