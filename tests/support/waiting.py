"""Waiting on the database, as a test watching a run from outside does."""

from __future__ import annotations

import time
from typing import Any, LiteralString

import psycopg


def wait_for_row(
    database_url: str,
    sql: LiteralString,
    params: tuple[Any, ...],
    *,
    what: str,
    timeout: float = 30,
) -> None:
    """Poll until `sql` returns a row whose first column is true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with psycopg.connect(database_url) as conn:
            row = conn.execute(sql, params).fetchone()
        if row and row[0]:
            return
        time.sleep(0.02)
    raise TimeoutError(what)
