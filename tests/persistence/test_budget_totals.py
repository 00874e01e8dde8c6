"""budget_status() sums budget_totals, kept by a trigger as charges are written: what it says
is what summing the whole ledger says (the function before migration 29, kept here), for
every kind of charge, a reservation turned into its charge, a child's charges on its parent,
an excluded reservation and items done in between.
"""

from __future__ import annotations

from typing import Any, LiteralString

from persistence.db import Pool, read
from tests.persistence.rows import made

FROM_LEDGER: LiteralString = """
WITH t AS (SELECT id, budget, created_at, waited_s
                  + CASE WHEN state = 'input_required'
                         THEN extract(epoch FROM clock_timestamp() - status_at) ELSE 0 END
                  AS waited_s
           FROM tasks WHERE id = %(task)s),
    charges AS (
        SELECT * FROM budget_charges WHERE task_id = %(task)s AND key <> %(exclude)s
    ),
    totals AS (
        SELECT coalesce(sum(tokens) FILTER (WHERE kind <> 'reservation'), 0) AS tokens,
               coalesce(sum(usd) FILTER (WHERE kind <> 'reservation'), 0) AS usd,
               coalesce(sum(tokens) FILTER (WHERE kind = 'reservation'), 0) AS tokens_reserved,
               coalesce(sum(usd) FILTER (WHERE kind = 'reservation'), 0) AS usd_reserved,
               coalesce(sum(actions), 0) AS actions
        FROM charges
    ),
    by_tool AS (
        SELECT coalesce(jsonb_object_agg(tool, jsonb_build_object(
                   'used', n, 'limit', (SELECT budget -> 'max_actions' -> tool FROM t))),
                   '{}'::jsonb) AS tools
        FROM (SELECT tool, sum(actions) AS n FROM charges WHERE tool IS NOT NULL
              GROUP BY tool) x
    ),
    progress AS (
        SELECT count(*) AS steps FROM charges
        WHERE kind NOT IN ('reservation', 'child')
          AND at > coalesce((SELECT max(at) FROM transitions
                             WHERE task_id = %(task)s AND to_state = 'done'),
                            '-infinity'::timestamptz)
    )
    SELECT jsonb_build_object(
        'usd', jsonb_build_object('used', round(totals.usd, 6),
                                  'reserved', round(totals.usd_reserved, 6),
                                  'limit', t.budget -> 'max_usd'),
        'tokens', jsonb_build_object('used', totals.tokens,
                                     'reserved', totals.tokens_reserved,
                                     'limit', t.budget -> 'max_tokens'),
        -- Wall time is the run's own: time spent waiting for a person is not counted
        -- (the age is, against the server's maximum run age).
        'wall_s', jsonb_build_object(
            'used', round((extract(epoch FROM clock_timestamp() - t.created_at)
                           - t.waited_s)::numeric, 1),
            'waited', round(t.waited_s::numeric, 1),
            'age', round(extract(epoch FROM clock_timestamp() - t.created_at)::numeric, 1),
            'limit', t.budget -> 'max_wall_s'),
        'steps_without_progress', jsonb_build_object(
            'used', progress.steps, 'limit', t.budget -> 'max_steps_without_progress'),
        'actions', jsonb_build_object(
            'used', totals.actions, 'limit', t.budget -> 'max_actions' -> '*'),
        'actions_by_tool', by_tool.tools,
        'limits', t.budget,
        'alerts', (SELECT coalesce(jsonb_agg(dimension || ':' || threshold), '[]'::jsonb)
                   FROM budget_alerts WHERE task_id = %(task)s))
    FROM t, totals, by_tool, progress
"""


async def both(pool: Pool, task_id: str, exclude: str = "") -> tuple[Any, Any]:
    async with read(pool) as conn:
        cur = await conn.execute("SELECT budget_status(%s, %s) AS s", (task_id, exclude))
        row = await cur.fetchone()
        assert row is not None
        kept = row["s"]
        cur = await conn.execute(FROM_LEDGER, {"task": task_id, "exclude": exclude})
        row = await cur.fetchone()
        assert row is not None
        summed = row["jsonb_build_object"]
    for status in (kept, summed):  # read at two moments
        status["wall_s"] = {k: v for k, v in status["wall_s"].items() if k == "limit"}
    return kept, summed


async def charge(pool: Pool, sql: LiteralString, *args: Any) -> None:
    async with read(pool) as conn:
        await conn.execute(sql, args)


INSERT: LiteralString = (
    "INSERT INTO budget_charges (key, task_id, kind, tool, tokens, usd, actions, at)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, clock_timestamp())"
)
DONE: LiteralString = (
    "INSERT INTO transitions (task_id, seq, item_id, to_state, reason)"
    " VALUES (%s, %s, 'i0', 'done', 'verified')"
)


async def test_the_kept_totals_say_what_the_ledger_sums(pool: Pool) -> None:
    parent = await made(pool)
    t = await made(pool, parent_id=parent)
    kept, summed = await both(pool, t)
    assert kept == summed and kept["tokens"]["used"] == 0  # no charge yet
    await charge(pool, INSERT, "m1", t, "model", None, 1200, 0.012, 0)
    await charge(pool, INSERT, "b1", t, "command", "bash", 0, 0, 1)
    await charge(pool, INSERT, "r1", t, "reservation", "bash", 500, 0.005, 1)
    await charge(pool, INSERT, "c1", parent, "child", "bash", 7, 0.001, 2)
    await charge(pool, DONE, t, 100)
    await charge(pool, INSERT, "b2", t, "tool", "write_file", 0, 0, 1)
    for key in ("", "r1", "b2", "m1", "nope"):
        kept, summed = await both(pool, t, key)
        assert kept == summed, key
    kept, _ = await both(pool, t)
    assert (kept["tokens"]["used"], kept["tokens"]["reserved"]) == (1200, 500)
    assert kept["actions_by_tool"]["bash"]["used"] == 2
    assert kept["steps_without_progress"]["used"] == 1  # b2, after the item was done
    # The reservation becomes its charge (record_step's upsert), then a charge is removed.
    await charge(
        pool,
        "UPDATE budget_charges SET kind = 'model', tokens = 800, usd = 0.008,"
        " at = clock_timestamp() WHERE key = %s",
        "r1",
    )
    await charge(pool, "DELETE FROM budget_charges WHERE key = %s", "b1")
    for task_id in (t, parent):
        kept, summed = await both(pool, task_id)
        assert kept == summed, task_id
    assert kept["actions_by_tool"] == {"bash": {"used": 2, "limit": None}}
    kept, _ = await both(pool, t)
    assert (kept["tokens"]["used"], kept["tokens"]["reserved"]) == (2000, 0)


async def test_a_missing_task_has_no_status(pool: Pool) -> None:
    async with read(pool) as conn:
        cur = await conn.execute("SELECT budget_status('nope', '') AS s")
        assert await cur.fetchone() == {"s": None}
