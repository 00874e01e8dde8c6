"""Migrations, applied one by one, reach exactly the schema of a fresh install."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest
from psycopg.rows import dict_row

from persistence.errors import SchemaOutdated
from persistence.migrate import (
    FUNCTIONS_SHA256,
    FUNCTIONS_VERSION,
    current_version,
    functions_sha256,
    latest_version,
    migrate,
    migrations,
)
from persistence.runs import PostgresRunStore
from persistence.tasks import PostgresTaskStore
from persistence.views import stored_view
from tests.persistence.rows import new_task

SCHEMA_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, is_nullable, column_default
        FROM information_schema.columns WHERE table_schema = 'public'
        ORDER BY table_name, column_name""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = 'public'::regnamespace
        ORDER BY 1, 2""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'
        ORDER BY 1, 2""",
    "compression": """
        SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute
        WHERE attcompression <> '' AND attrelid IN (
            SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)
        ORDER BY 1, 2""",
    "triggers": """
        SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger
        WHERE NOT tgisinternal ORDER BY 1, 2""",
}


def schema_of(url: str) -> dict[str, list[tuple[object, ...]]]:
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in SCHEMA_QUERIES.items()}


async def test_step_by_step_equals_fresh_install(
    make_database: Callable[[str | None], str],
) -> None:
    fresh, stepwise = make_database(None), make_database(None)
    assert await migrate(fresh) == [m.version for m in migrations()]
    assert await migrate(stepwise, step_by_step=True) == [m.version for m in migrations()]
    fresh_schema, stepwise_schema = schema_of(fresh), schema_of(stepwise)
    assert fresh_schema["columns"], "the schema should not be empty"
    assert {t[1] for t in fresh_schema["triggers"]} >= {
        "effects_fold_metrics",
        "tasks_fold_metrics",
    }
    assert fresh_schema == stepwise_schema
    assert await current_version(fresh) == await current_version(stepwise) == latest_version()


async def test_migrate_is_idempotent_and_resumes_a_partial_database(
    make_database: Callable[[str | None], str],
) -> None:
    url = make_database(None)
    first = migrations()[0]
    with psycopg.connect(url) as conn:
        conn.execute(first.sql)
        conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
            "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, 'initial')")
    assert await migrate(url) == [m.version for m in migrations()[1:]]
    assert await migrate(url) == []
    assert await current_version(url) == latest_version()


async def test_newer_database_is_refused(make_database: Callable[[str | None], str]) -> None:
    url = make_database(None)
    await migrate(url)
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (999, 'future')")
    with pytest.raises(SchemaOutdated, match="newer than this code"):
        await migrate(url)


async def test_functions_are_the_same_after_migrations_and_fresh_install(
    make_database: Callable[[str | None], str],
) -> None:
    fresh, stepwise = make_database(None), make_database(None)
    await migrate(fresh)
    await migrate(stepwise, step_by_step=True)
    query = (
        "SELECT p.proname, l.lanname, pg_get_functiondef(p.oid) FROM pg_proc p "
        "JOIN pg_language l ON l.oid = p.prolang "
        "WHERE p.pronamespace = 'public'::regnamespace ORDER BY 1"
    )
    with psycopg.connect(fresh) as a, psycopg.connect(stepwise) as b:
        fresh_functions = a.execute(query).fetchall()
        stepwise_functions = b.execute(query).fetchall()
    assert {name for name, lang, _ in fresh_functions if lang == "plpgsql"} >= {
        "apply_task_change",
        "budget_status",
        "record_step",
    }
    assert fresh_functions == stepwise_functions


def test_functions_sql_and_its_version_go_together() -> None:
    assert functions_sha256() == FUNCTIONS_SHA256, (
        "persistence/functions.sql changed: bump FUNCTIONS_VERSION in persistence/migrate.py "
        f"and set FUNCTIONS_SHA256 = {functions_sha256()!r}"
    )


async def test_older_functions_are_refused_newer_ones_applied_once(
    make_database: Callable[[str | None], str],
) -> None:
    """A rolling upgrade: new code migrated the database; an old process then starting must
    not put its functions back, and a newer one brings its own."""
    url = make_database(None)
    await migrate(url)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version, sha256 FROM schema_functions").fetchone()
        assert row == (FUNCTIONS_VERSION, FUNCTIONS_SHA256)
        # Newer code ran here: its functions are version +1 (record_step replaced, say).
        conn.execute("UPDATE schema_functions SET version = version + 1, sha256 = 'newer'")
        conn.execute(
            "CREATE OR REPLACE FUNCTION budget_status(p_task_id text, p_exclude_key text) "
            "RETURNS jsonb LANGUAGE sql AS $$ SELECT '{\"newer\": true}'::jsonb $$"
        )
    with pytest.raises(SchemaOutdated, match="newer than this code's"):
        await migrate(url)
    with psycopg.connect(url) as conn:  # refused: nothing of ours was put back
        assert conn.execute("SELECT budget_status('t', '')").fetchone() == ({"newer": True},)
        # The same version with other text is refused too.
        conn.execute("UPDATE schema_functions SET version = %s", (FUNCTIONS_VERSION,))
    with pytest.raises(SchemaOutdated, match="must bump FUNCTIONS_VERSION"):
        await migrate(url)
    with psycopg.connect(url) as conn:  # an older database: ours are applied and recorded
        conn.execute("UPDATE schema_functions SET version = %s", (FUNCTIONS_VERSION - 1,))
    await migrate(url)
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version, sha256 FROM schema_functions").fetchone()
        assert row == (FUNCTIONS_VERSION, FUNCTIONS_SHA256)
        assert conn.execute("SELECT budget_status('t', '')").fetchone() != ({"newer": True},)


async def test_items_stored_before_views_get_them_from_migrate(
    make_database: Callable[[str | None], str],
) -> None:
    """Rows written before migration 25 have no view: `migrate` computes each, as every
    write computes them (persistence/views.py), and the plan shows them again."""
    url = make_database(None)
    await migrate(url)
    pool = PostgresTaskStore.create_pool(url)
    await pool.open()
    try:
        store = PostgresTaskStore(pool)
        ids = [(await store.create_task(new_task(items=3))).row.task_id for _ in range(2)]
        with psycopg.connect(url) as conn:
            conn.execute("UPDATE items SET view = NULL")
        assert await migrate(url) == []
        runs = PostgresRunStore(pool)
        with psycopg.connect(url, row_factory=dict_row) as conn:
            for task_id in ids:
                stored = conn.execute(
                    "SELECT view FROM items WHERE task_id = %s ORDER BY position", (task_id,)
                ).fetchall()
                items = (await runs.view(task_id)).items
                assert [r["view"] for r in stored] == [stored_view(i) for i in items]
    finally:
        await pool.close()
