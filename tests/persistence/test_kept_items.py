"""The items a worker keeps between a task's steps (persistence/kept.py): a step's view reads
them only when a write since its own last one, and what it gets is always what a fresh read
gives.

"Behind" below writes an item's title without counting a write (as no code path does): a
view that still shows the old title read no items, one that shows the new title read them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid

from persistence.db import Pool, read
from persistence.records import ItemChange, ItemRow, NewItem, StepRecord, Transition
from persistence.runs import PostgresRunStore
from persistence.tasks import PostgresTaskStore
from tests.persistence.rows import made, new_task, recorded, task


def started(task_id: str, item_id: str, name: str) -> StepRecord:
    return StepRecord(
        effect_key=f"{task_id}:{name}",
        step=name,
        result={},
        item=ItemChange(item_id, "in_progress", 1, history=[{"attempt": 1, "by": name}]),
        transitions=[Transition("in_progress", name, item_id=item_id, attempt=1)],
    )


async def behind(pool: Pool, task_id: str, title: str) -> None:
    async with read(pool) as conn:
        await conn.execute("UPDATE items SET title = %s WHERE task_id = %s", (title, task_id))


def plain(items: list[ItemRow]) -> list[ItemRow]:
    return [dataclasses.replace(i, elapsed_s=None) for i in items]


async def fresh(pool: Pool, task_id: str) -> list[ItemRow]:
    return plain((await PostgresRunStore(pool).view(task_id)).items)


async def test_a_view_after_its_own_record_reads_no_items(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, started(t, "i0", "begin"))
    written = await fresh(pool, t)
    assert plain((await runs.view(t)).items) == written  # what the record worked out
    assert written[0].status == "in_progress" and written[0].history == [
        {"attempt": 1, "by": "begin"}
    ]
    await behind(pool, t, "written behind")
    assert {i.title for i in (await runs.view(t)).items} == {"item 0", "item 1"}
    assert {i.title for i in await fresh(pool, t)} == {"written behind"}


async def test_a_write_by_another_process_is_read(pool: Pool) -> None:
    mine, theirs, t = PostgresRunStore(pool), PostgresRunStore(pool), await made(pool)
    await mine.view(t)
    await recorded(theirs, t, started(t, "i1", "theirs"))
    seen = await mine.view(t)
    assert seen.item("i1").status == "in_progress" and plain(seen.items) == await fresh(pool, t)


async def test_a_record_from_rows_another_process_changed_is_not_kept(pool: Pool) -> None:
    mine, theirs, t = PostgresRunStore(pool), PostgresRunStore(pool), await made(pool)
    stale = (await mine.view(t)).items
    await recorded(theirs, t, started(t, "i1", "theirs"))
    # Mine works out i0's change from rows that predate theirs: what it would keep is wrong
    # about i1, so it keeps nothing and reads the rows at its next view.
    await mine.record_step(t, started(t, "i0", "mine"), stale)
    await behind(pool, t, "written behind")
    seen = await mine.view(t)
    assert {i.title for i in seen.items} == {"written behind"}
    assert plain(seen.items) == await fresh(pool, t)
    assert [i.status for i in seen.items] == ["in_progress", "in_progress"]


async def test_a_replayed_record_drops_what_was_kept(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, started(t, "i0", "begin"))
    again = await recorded(runs, t, started(t, "i0", "begin"))
    assert again.replayed
    await behind(pool, t, "written behind")
    assert {i.title for i in (await runs.view(t)).items} == {"written behind"}


async def test_a_step_that_changes_no_item_keeps_them(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, started(t, "i0", "begin"))
    before = (await task(pool, t))["items_rev"]
    await recorded(runs, t, StepRecord(effect_key=f"{t}:note", step="note", result={"n": 1}))
    assert (await task(pool, t))["items_rev"] == before
    await behind(pool, t, "written behind")
    assert "written behind" not in {i.title for i in (await runs.view(t)).items}


async def test_a_kept_item_with_a_time_limit_reads_its_clock_again(pool: Pool) -> None:
    timed = new_task(task_id=str(uuid.uuid4()))
    timed = dataclasses.replace(
        timed, items=[NewItem("i0", "item 0", "true", "true", 5, 2, timeout_s=600)]
    )
    t = (await PostgresTaskStore(pool).create_task(timed)).row.task_id
    runs = PostgresRunStore(pool)
    await recorded(runs, t, started(t, "i0", "begin"))
    first = (await runs.view(t)).item("i0").elapsed_s
    await asyncio.sleep(0.05)
    later = (await runs.view(t)).item("i0").elapsed_s
    assert first is not None and later is not None and later >= first + 0.04
    left = (await runs.view(t)).item("i0").time_left_s()
    assert left is not None and 599 < left < 600
    # The kept row, with its clock read again, is still the one a record may start from.
    await recorded(runs, t, started(t, "i0", "again"))
    assert (await runs.view(t)).item("i0").history == [{"attempt": 1, "by": "again"}]
    await behind(pool, t, "written behind")
    assert (await runs.view(t)).item("i0").title == "item 0"
