"""Waiting on the database, as a test watching a run from outside does."""

from __future__ import annotations

import time
from pathlib import Path
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


def wait_for_line(path: Path, needle: str, *, timeout: float = 30) -> None:
    """Poll until a line of the file at `path` holds `needle` (a command has started: its first
    act is to write its key there). An effect's row appears earlier: the step before it marks
    it as the one that comes next."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and any(needle in line for line in path.read_text().splitlines()):
            return
        time.sleep(0.02)
    raise TimeoutError(f"{needle} never appeared in {path}")
