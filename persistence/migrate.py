"""Numbered SQL migrations with a version table; a fresh database gets schema.sql (the first
migrations in one file) and the migrations after it.

`functions.sql` (the PL/pgSQL the stores call) is applied after the migrations on every
start, under a version of its own: `FUNCTIONS_VERSION`, recorded in `schema_functions`. A
process whose functions are older than the database's refuses to start (it would put its
functions back under the newer code's processes); the same version with other text is
refused too. `tests/test_migrations.py` ties `FUNCTIONS_SHA256` to the file, so an edit of
functions.sql fails the suite until the version is bumped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import LiteralString

import psycopg

from persistence.db import translated
from persistence.errors import SchemaOutdated, StoreError
from persistence.records import ItemRow
from persistence.safe import jsonb
from persistence.sql import q
from persistence.views import stored_view

_FILE = re.compile(r"^(\d{4})_(\w+)\.sql$")
# Bump FUNCTIONS_VERSION with every change of functions.sql, and set FUNCTIONS_SHA256 to
# the file's sha256 (the migrations test says what it is).
FUNCTIONS_VERSION = 13
# schema.sql is the migrations up to this one in one file: a fresh database gets it, then
# the migrations after it (which are not written twice).
SCHEMA_SQL_VERSION = 26
FUNCTIONS_SHA256 = "df120f41d134eeb3edca70b18140eaa268f6ab98eacc70a6e85bc0bf20933994"


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


def functions_sha256() -> str:
    return hashlib.sha256(functions().encode()).hexdigest()


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

    A database without our tables gets `schema.sql` in one go (unless `step_by_step`), then
    the migrations after `SCHEMA_SQL_VERSION`, and every version is recorded; an existing
    one gets each missing migration in order, each in its own transaction. Concurrent callers
    serialise on an advisory lock.
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
                for m in all_migrations:
                    if m.version > SCHEMA_SQL_VERSION:
                        await conn.execute(_read_sql(m.sql))
                    await conn.execute(q("record_version"), {"version": m.version, "name": m.name})
                await _apply_functions(conn)
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
            await _apply_functions(conn)
        await _give_items_views(conn)
    return applied_now


async def _give_items_views(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    """Items stored before they had views (migration 25) get them, computed here as every
    write computes them; a batch per transaction."""
    while True:
        async with conn.transaction():
            await conn.execute(q("lock_migrations"))
            cur = await conn.execute(q("items_without_view"))
            rows = await cur.fetchall()
            for task_id, item in rows:
                assert isinstance(item, dict)
                view = stored_view(ItemRow(**item))
                await conn.execute(
                    q("set_item_view"),
                    {"view": jsonb(view), "task_id": task_id, "item_id": item["item_id"]},
                )
        if len(rows) < 500:
            return


async def _apply_functions(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
    """functions.sql, unless the database runs newer ones (or other ones under this version)."""
    await conn.execute(q("create_functions_table"))
    cur = await conn.execute(q("functions_version"))
    row = await cur.fetchone()
    mine, sha = FUNCTIONS_VERSION, functions_sha256()
    if row is not None:
        version, theirs = int(str(row[0])), str(row[1])
        if version > mine:
            raise SchemaOutdated(
                f"the database runs SQL functions of version {version}, newer than this code's "
                f"{mine}: another process of newer code migrated it. Start the newer a2a-agent "
                "(this one would put its older functions back under it)"
            )
        if version == mine and theirs != sha:
            raise SchemaOutdated(
                f"the database runs SQL functions of version {version} with other text than "
                "this code's functions.sql of the same version; a release that changes "
                "functions.sql must bump FUNCTIONS_VERSION (persistence/migrate.py)"
            )
        if version == mine:
            return  # the same functions: nothing to apply
    await conn.execute(_read_sql(functions()))
    await conn.execute(q("record_functions"), {"version": mine, "sha256": sha})


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
