"""budget_status() sums budget_totals, kept by a trigger as charges are written: what it says
is what summing the whole ledger says (worked out here from its rows), for
every kind of charge, a reservation turned into its charge, a child's charges on its parent,
an excluded reservation and items done in between.
"""

from __future__ import annotations

from typing import Any, LiteralString

from persistence.db import Pool, read
from tests.persistence.rows import made


def from_ledger(charges: list[dict[str, Any]], last_done: Any, exclude: str) -> dict[str, Any]:
    """What the ledger sums to, worked out here from its rows (the oracle the totals answer
    to): used and reserved money and tokens, actions in all and per tool, and the steps
    charged after the last item was done (reservations and children's charges aside)."""
    rows = [c for c in charges if c["key"] != exclude]
    spent = [c for c in rows if c["kind"] != "reservation"]
    held = [c for c in rows if c["kind"] == "reservation"]
    tools: dict[str, int] = {}
    for c in rows:
        if c["tool"] is not None:
            tools[c["tool"]] = tools.get(c["tool"], 0) + c["actions"]
    after = [c for c in rows if last_done is None or c["at"] > last_done]
    return {
        "usd": [float(sum(c["usd"] for c in spent)), float(sum(c["usd"] for c in held))],
        "tokens": [sum(c["tokens"] for c in spent), sum(c["tokens"] for c in held)],
        "actions": sum(c["actions"] for c in rows),
        "by_tool": {tool: n for tool, n in tools.items() if n},
        "steps": sum(1 for c in after if c["kind"] not in ("reservation", "child")),
    }


def shown(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "usd": [float(status["usd"]["used"]), float(status["usd"]["reserved"])],
        "tokens": [status["tokens"]["used"], status["tokens"]["reserved"]],
        "actions": status["actions"]["used"],
        "by_tool": {tool: n["used"] for tool, n in status["actions_by_tool"].items()},
        "steps": status["steps_without_progress"]["used"],
    }


async def both(pool: Pool, task_id: str, exclude: str = "") -> tuple[Any, Any]:
    """budget_status() as kept, and the ledger's rows summed here."""
    async with read(pool) as conn:
        cur = await conn.execute("SELECT budget_status(%s, %s) AS s", (task_id, exclude))
        row = await cur.fetchone()
        assert row is not None
        cur = await conn.execute("SELECT * FROM budget_charges WHERE task_id = %s", (task_id,))
        charges = await cur.fetchall()
        cur = await conn.execute(
            "SELECT max(at) AS at FROM transitions WHERE task_id = %s AND to_state = 'done'",
            (task_id,),
        )
        done = await cur.fetchone()
        assert done is not None
    return shown(row["s"]), from_ledger(charges, done["at"], exclude)


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
    assert kept == summed and kept["tokens"] == [0, 0]  # no charge yet
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
    assert kept["tokens"] == [1200, 500] and kept["by_tool"]["bash"] == 2
    assert kept["steps"] == 1  # b2, after the item was done
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
    assert kept["by_tool"] == {"bash": 2}
    kept, _ = await both(pool, t)
    assert kept["tokens"] == [2000, 0]


async def test_a_missing_task_has_no_status(pool: Pool) -> None:
    async with read(pool) as conn:
        cur = await conn.execute("SELECT budget_status('nope', '') AS s")
        assert await cur.fetchone() == {"s": None}
