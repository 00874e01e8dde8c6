"""A benchmark's own database: made on the server, migrated (ours and DBOS's), dropped after."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from dbos import run_dbos_database_migrations
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2a_agent.database import sqlalchemy_url
from persistence.migrate import migrate


@contextmanager
def bench_database(server_url: str, prefix: str) -> Iterator[str]:
    """The URL of a fresh, migrated database `<prefix>_<random>` on `server_url`'s server,
    dropped (with whatever is still connected) when the block ends."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = make_conninfo(server_url, dbname=name)
    try:
        asyncio.run(migrate(url))
        run_dbos_database_migrations(sqlalchemy_url(url))
        yield url
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        print(f"dropped database {name}")
