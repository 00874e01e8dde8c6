"""`apply_task_change()` (functions.sql), branch by branch, on a real database: each test
applies one change as the stores do (`persistence.changes.apply_change` in a transaction
that locked the task) and checks the rows, events and notifications it wrote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg

from persistence.changes import TaskChange, apply_change
from persistence.db import Pool, read, transaction
from persistence.records import (
    JSON,
    ItemChange,
    NewDelegation,
    PauseRequest,
    StepRecord,
    Transition,
)
from persistence.runs import PostgresRunStore
from persistence.safe import jsonb
from persistence.sql import q
from persistence.tasks import PostgresTaskStore
from persistence.views import item_view, progress_counts, stored_view, verification_counts
from tests.persistence.rows import made, recorded, rows, task


async def change(pool: Pool, task_id: str, what: TaskChange | JSON) -> None:
    """Apply `what` as the stores do: lock the task, then apply it from its counters."""
    async with transaction(pool) as conn:
        cur = await conn.execute(
            "SELECT transition_seq, event_seq FROM tasks WHERE id = %s FOR UPDATE", (task_id,)
        )
        locked = await cur.fetchone()
        assert locked is not None
        seqs = {"seq": locked["transition_seq"], "event_seq": locked["event_seq"]}
        if isinstance(what, TaskChange):
            await apply_change(conn, task_id, what, **seqs)
        else:  # keys TaskChange does not carry (record_step() passes them)
            params = {"task_id": task_id, "change": jsonb(what), **seqs}
            await conn.execute(q("apply_task_change"), params)


async def events(pool: Pool, task_id: str, after: int) -> list[JSON]:
    return [b for _, b in await PostgresTaskStore(pool).events_after(task_id, after)]


def kinds(bodies: list[JSON]) -> list[str]:
    return [str(b.get("name") or b.get("state")) for b in bodies]


async def asked(pool: Pool, task_id: str) -> None:
    """The task waits for a person (a pause row and input_required, as a step records it)."""
    await recorded(
        PostgresRunStore(pool),
        task_id,
        StepRecord(
            effect_key=f"{task_id}:ask",
            step="ask",
            result={},
            task_state="input_required",
            pause=PauseRequest("q1", "question", "Which?", ["a"], "a", 600.0),
        ),
    )


async def test_transitions_are_numbered_from_the_counter_and_nothing_else_moves(
    pool: Pool,
) -> None:
    t = await made(pool)
    before = await task(pool, t)
    at = datetime.now(UTC) - timedelta(hours=1)
    await change(
        pool,
        t,
        TaskChange(
            transitions=[
                Transition("submitted", "noted", at=at),
                Transition("submitted", "again", "i0", 1),
            ]
        ),
    )
    written = await rows(pool, "SELECT * FROM transitions WHERE task_id = %s ORDER BY seq", t)
    assert [(w["seq"], w["reason"], w["item_id"]) for w in written] == [
        (1, "task received", None),
        (2, "noted", None),
        (3, "again", "i0"),
    ]
    assert written[1]["at"] == at and written[2]["at"] > at
    after = await task(pool, t)
    assert after["transition_seq"] == 3
    # No state, no items, no report: the status, its time and the events stay as they were.
    assert (after["event_seq"], after["status_text"], after["status_at"], after["plan"]) == (
        before["event_seq"],
        before["status_text"],
        before["status_at"],
        before["plan"],
    )


async def test_a_state_writes_the_status_and_one_status_event(pool: Pool) -> None:
    t = await made(pool)
    seq = (await task(pool, t))["event_seq"]
    await change(pool, t, TaskChange(state="working", status_text="on it"))
    row = await task(pool, t)
    assert (row["state"], row["status_text"], row["event_seq"]) == ("working", "on it", seq + 1)
    [status] = await events(pool, t, seq)
    assert (status["kind"], status["state"], status["text"]) == ("status", "working", "on it")


async def test_asking_a_person_shows_in_the_plan_without_an_item_change(pool: Pool) -> None:
    t = await made(pool)
    seq = (await task(pool, t))["event_seq"]
    await change(pool, t, TaskChange(state="input_required", status_text="waiting"))
    assert kinds(await events(pool, t, seq)) == ["plan", "input_required"]


async def test_leaving_a_wait_ends_its_request_and_numbers_the_next_segment(pool: Pool) -> None:
    t = await made(pool)
    await asked(pool, t)
    waiting = await task(pool, t)
    assert waiting["status_data"] is not None
    # Staying in the wait changes nothing of it.
    await change(pool, t, TaskChange(state="input_required", status_text="still"))
    assert (await task(pool, t))["segment"] == waiting["segment"]
    await change(pool, t, TaskChange(state="working", status_text="resumed"))
    row = await task(pool, t)
    assert row["segment"] == waiting["segment"] + 1
    assert row["waited_s"] > 0 and row["status_data"] is None
    [pause] = await rows(pool, "SELECT decision, decided_how FROM pauses WHERE task_id = %s", t)
    assert pause == {"decision": "ended", "decided_how": "ended"}
    assert [d["status"] for d in row["plan"]["decisions"]] == ["decided"]


async def test_an_end_while_a_delegate_works_numbers_the_closing_segment(pool: Pool) -> None:
    waits, alone = await made(pool), await made(pool)
    runs = PostgresRunStore(pool)
    for t in (waits, alone):
        await change(pool, t, TaskChange(state="working"))
    await recorded(
        runs,
        waits,
        StepRecord(f"{waits}:send", "send", {}, delegation=NewDelegation("d1", "sub", peer="p")),
    )
    before = {t: (await task(pool, t))["segment"] for t in (waits, alone)}
    for t in (waits, alone):
        await change(pool, t, TaskChange(state="canceled", status_text="stop"))
    assert (await task(pool, waits))["segment"] == before[waits] + 1
    assert (await task(pool, alone))["segment"] == before[alone]


async def test_an_item_change_stores_its_views_and_the_plan_is_assembled_from_them(
    pool: Pool,
) -> None:
    runs = PostgresRunStore(pool)
    t, empty = await made(pool), await made(pool, items=0)
    seq = (await task(pool, t))["event_seq"]
    history = [{"attempt": 1, "outcome": "done"}]
    done = ItemChange("i0", "done", 1, {"exit_code": 0}, "c0", history=history)
    await recorded(runs, t, StepRecord(effect_key=f"{t}:s", step="s", result={}, item=done))
    row = await task(pool, t)
    items = (await runs.view(t)).items
    # The artifact is the items' views (computed once, in persistence/views.py), in order.
    assert row["plan"]["items"] == [item_view(i) for i in items]
    assert [i["status"] for i in row["plan"]["items"]] == ["done", "pending"]
    stored = await rows(pool, "SELECT view FROM items WHERE task_id = %s ORDER BY position", t)
    assert [r["view"] for r in stored] == [stored_view(i) for i in items]
    assert "history" not in stored[0]["view"]  # kept once, in its column
    assert row["metadata"]["progress"] == progress_counts(items)
    assert (row["metadata"]["progress"]["items_done"], len(items)) == (1, 2)
    assert row["metadata"]["verification"] == verification_counts(items)
    [plan] = await events(pool, t, seq)
    assert plan["name"] == "plan" and plan["data"]["items"][0]["history"] == history
    await change(pool, empty, TaskChange(items_changed=True))
    assert (await task(pool, empty))["plan"] is None  # no items: no plan artifact


async def test_a_change_that_only_shows_a_decision_keeps_the_summary(pool: Pool) -> None:
    t = await made(pool)
    before = (await task(pool, t))["metadata"]
    await change(pool, t, TaskChange(items_changed=True))  # as a request asked or decided
    after = (await task(pool, t))["metadata"]
    assert (after["progress"], after["verification"]) == (
        before["progress"],
        before["verification"],
    )


async def test_a_report_is_an_event_and_so_is_each_of_its_outputs(pool: Pool) -> None:
    t = await made(pool)
    seq = (await task(pool, t))["event_seq"]
    report = {"outcome": "completed", "outputs": [{"name": "diff"}, {"name": "bundle"}]}
    await change(pool, t, TaskChange(state="completed", report=report, items_changed=True))
    written = await events(pool, t, seq)
    assert kinds(written) == ["plan", "report", "diff", "bundle", "completed"]
    assert written[1]["data"] == report and written[3]["data"] == {"name": "bundle"}
    row = await task(pool, t)
    assert row["report"] == report and row["event_seq"] == seq + 5
    await change(pool, t, TaskChange(transitions=[Transition("completed", "later")]))
    assert (await task(pool, t))["report"] == report  # a change without one keeps it


async def test_a_charged_change_refreshes_the_budget(pool: Pool) -> None:
    t = await made(pool)
    async with read(pool) as conn:
        await conn.execute(
            "INSERT INTO budget_charges (key, task_id, kind, tokens) VALUES (%s, %s, 'model', 42)",
            (f"{t}:k", t),
        )
    await change(pool, t, TaskChange(status_text="x"))
    assert (await task(pool, t))["metadata"]["budget"]["tokens"]["used"] == 0
    await change(pool, t, TaskChange(charged=True))
    assert (await task(pool, t))["metadata"]["budget"]["tokens"]["used"] == 42


async def test_the_workspace_record_and_patches_merge_into_the_row(pool: Pool) -> None:
    t = await made(pool)
    await change(
        pool,
        t,
        {
            "fingerprint": "f1",
            "checkpoint_sha": "c1",
            "base_sha": "b1",
            "metadata_patch": {"a": 1},
            "policy_patch": {"p": 1},
            "seed_patch": {"kind": "git", "url": "u"},
        },
    )
    await change(
        pool,
        t,
        {
            "metadata_patch": {"b": 2},
            "policy_patch": {"q": 2},
            "seed_patch": {"commit": "c"},
            "fingerprint": None,
        },
    )
    row = await task(pool, t)
    assert (row["workspace_fingerprint"], row["checkpoint_sha"], row["base_sha"]) == (
        "f1",
        "c1",
        "b1",
    )
    assert row["metadata"]["a"] == 1 and row["metadata"]["b"] == 2
    assert row["policy"] == {"p": 1, "q": 2}
    assert row["seed"] == {"kind": "git", "url": "u", "commit": "c"}
    await change(pool, t, {"seed_patch": None})
    assert (await task(pool, t))["seed"] == row["seed"]


async def test_a_status_data_travels_with_a_state_only(pool: Pool) -> None:
    t = await made(pool)
    await change(pool, t, {"state": "working", "status_data": {"approval_request": {"id": "x"}}})
    await change(pool, t, {"status_data": {"other": 1}})  # no state: the status stays
    assert (await task(pool, t))["status_data"] == {"approval_request": {"id": "x"}}


async def test_every_change_notifies_and_new_events_wake_the_deliverers(
    pool: Pool, database_url: str
) -> None:
    pushed, quiet = await made(pool), await made(pool)
    async with read(pool) as conn:
        await conn.execute(
            "INSERT INTO push_configs (task_id, id, owner, url) VALUES (%s, 'p', 'o', 'http://x')",
            (pushed,),
        )
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listen:
        await listen.execute("LISTEN a2a_task_events")
        await listen.execute("LISTEN a2a_push_events")
        await change(pool, pushed, TaskChange(transitions=[Transition("submitted", "no event")]))
        await change(pool, quiet, TaskChange(state="working"))
        await change(pool, pushed, TaskChange(state="working"))
        heard = [(n.channel, n.payload) async for n in listen.notifies(timeout=1.0)]
    assert heard == [
        ("a2a_task_events", pushed),
        ("a2a_task_events", quiet),
        ("a2a_task_events", pushed),
        ("a2a_push_events", pushed),
    ]


async def test_a_childs_end_shows_on_its_parent(pool: Pool) -> None:
    parent = await made(pool)
    await change(pool, parent, TaskChange(state="working"))
    child, silent = await made(pool, parent_id=parent), await made(pool, parent_id=parent)
    runs = PostgresRunStore(pool)
    for n, kid in enumerate((child, silent)):
        handed = NewDelegation(f"d{n}", "sub", child_id=kid)
        await recorded(runs, parent, StepRecord(f"{parent}:send{n}", "send", {}, delegation=handed))
    segment = (await task(pool, parent))["segment"]
    await change(pool, silent, TaskChange(state="failed", status_text="no report"))
    await change(pool, child, TaskChange(state="completed", report={"outcome": "completed"}))
    states = await rows(
        pool, "SELECT id, state, result FROM delegations WHERE task_id = %s ORDER BY id", parent
    )
    assert [(d["id"], d["state"]) for d in states] == [("d0", "ended"), ("d1", "pending")]
    assert states[0]["result"]["report"] == {"outcome": "completed"}
    row = await task(pool, parent)
    assert row["segment"] == segment + 1 and row["state"] == "working"
