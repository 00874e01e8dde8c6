"""Numbered SQL migrations with a version table; a fresh database gets schema.sql at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import LiteralString

import psycopg

from persistence.db import translated
from persistence.errors import SchemaOutdated, StoreError
from persistence.sql import q

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    found = []
    for entry in resources.files("persistence").joinpath("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text()))
    found.sort(key=lambda m: m.version)
    for expected, migration in enumerate(found, start=1):
        if migration.version != expected:
            raise StoreError(f"migration numbers must run 1, 2, 3...; found {migration.version}")
    return found


def fresh_schema() -> str:
    return resources.files("persistence").joinpath("schema.sql").read_text()


def functions() -> str:
    return resources.files("persistence").joinpath("functions.sql").read_text()


def latest_version() -> int:
    return migrations()[-1].version


def _read_sql(text: str) -> LiteralString:
    # Migration files are trusted code from this package, run as one multi-statement batch.
    return text


async def migrate(conninfo: str, *, step_by_step: bool = False) -> list[int]:
    with translated("migrating the schema"):
        return await _migrate(conninfo, step_by_step=step_by_step)


async def _migrate(conninfo: str, *, step_by_step: bool) -> list[int]:
    """Bring the database to the latest version; returns the versions applied now.

    A database without our tables gets `schema.sql` in one go (unless `step_by_step`), and
    every version is recorded; an existing one gets each missing migration in order, each in
    its own transaction. Concurrent callers serialise on an advisory lock.
    """
    applied_now: list[int] = []
    all_migrations = migrations()
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        async with conn.transaction():
            await conn.execute(q("lock_migrations"))
            await conn.execute(q("create_version_table"))
            cur = await conn.execute(q("applied_versions"))
            applied = {row[0] for row in await cur.fetchall()}
            newest = all_migrations[-1].version
            if applied and max(applied) > newest:
                raise SchemaOutdated(
                    f"the database is at schema version {max(applied)}, newer than this code's "
                    f"{newest}; upgrade a2a-agent before starting it against this database"
                )
            cur = await conn.execute(q("has_tables"))
            row = await cur.fetchone()
            tables_present = bool(row and row[0])
            if not applied and not tables_present and not step_by_step:
                await conn.execute(_read_sql(fresh_schema()))
                await conn.execute(_read_sql(functions()))
                for m in all_migrations:
                    await conn.execute(q("record_version"), {"version": m.version, "name": m.name})
                return [m.version for m in all_migrations]
        for m in all_migrations:
            if m.version in applied:
                continue
            async with conn.transaction():
                await conn.execute(q("lock_migrations"))
                cur = await conn.execute(q("applied_versions"))
                if m.version in {r[0] for r in await cur.fetchall()}:
                    continue
                await conn.execute(_read_sql(m.sql))
                await conn.execute(q("record_version"), {"version": m.version, "name": m.name})
                applied_now.append(m.version)
        async with conn.transaction():
            await conn.execute(q("lock_migrations"))
            await conn.execute(_read_sql(functions()))
    return applied_now


async def current_version(conninfo: str) -> int:
    with translated("reading the schema version"):
        return await _current_version(conninfo)


async def _current_version(conninfo: str) -> int:
    async with await psycopg.AsyncConnection.connect(conninfo) as conn:
        await conn.execute(q("create_version_table"))
        cur = await conn.execute(q("applied_versions"))
        versions = [row[0] for row in await cur.fetchall()]
        await conn.commit()
    return max(versions, default=0)
