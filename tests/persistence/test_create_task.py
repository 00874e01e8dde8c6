"""`create_task()` (functions.sql), branch by branch, on a real database: a submission, a
repeated messageId, a rejection, a workspace seeded from an earlier task or viewed from a
parent's, a continuation, and each refusal; through `PostgresTaskStore.create_task`."""

from __future__ import annotations

from typing import Any

import pytest

from persistence.db import Pool, read, transaction
from persistence.errors import InvalidData, StoreUnavailable
from persistence.records import (
    Checkpoint,
    InputFile,
    ItemChange,
    StepRecord,
    Submitted,
)
from persistence.runs import PostgresRunStore
from persistence.safe import jsonb
from persistence.sql import q
from persistence.tasks import CannotContinue, PostgresTaskStore
from tests.persistence.rows import new_task, recorded, rows, task

GIT = {"kind": "git", "url": "https://example.com/r.git", "ref": "main"}


async def submit(pool: Pool, items: int = 2, **fields: Any) -> Submitted:
    return await PostgresTaskStore(pool).create_task(new_task(items, **fields))


async def ended(pool: Pool, items: int = 2, *, done: int = 0, shas: int = 1, **fields: Any) -> str:
    """A task that ran and completed: `shas` checkpoints, its first `done` items verified."""
    t = (await submit(pool, items, **fields)).row.task_id
    runs = PostgresRunStore(pool)
    for n in range(shas):
        checkpoint = Checkpoint(f"sha{n}", f"bundle {n}".encode())
        await recorded(runs, t, StepRecord(f"{t}:c{n}", "c", {}, checkpoint=checkpoint))
    for n in range(done):
        change = ItemChange(f"i{n}", "done", 1, {"exit": 0}, f"commit{n}", 0, [{"attempt": 1}])
        await recorded(runs, t, StepRecord(f"{t}:d{n}", "d", {}, item=change))
    await recorded(runs, t, StepRecord(f"{t}:end", "end", {}, task_state="completed"))
    return t


async def test_a_submission_writes_the_task_its_items_and_first_events(pool: Pool) -> None:
    made = await submit(pool, trace_context="00-abc-def-01", budget={"max_usd": 1})
    t = made.row.task_id
    assert not made.repeated and made.same_message
    assert (made.row.state, made.row.status_text) == (
        "submitted",
        "Accepted; waiting for a worker.",
    )
    row = await task(pool, t)
    assert (row["trace_context"], row["budget"]) == ("00-abc-def-01", {"max_usd": 1})
    assert row["metadata"]["budget"]["usd"]["limit"] == 1  # derived from the start
    assert row["metadata"]["progress"]["items_total"] == 2
    items = await rows(
        pool, "SELECT item_id, position, status FROM items WHERE task_id = %s ORDER BY position", t
    )
    assert [(i["item_id"], i["position"], i["status"]) for i in items] == [
        ("i0", 0, "pending"),
        ("i1", 1, "pending"),
    ]
    [first] = await rows(pool, "SELECT * FROM transitions WHERE task_id = %s", t)
    assert (first["seq"], first["to_state"], first["reason"]) == (1, "submitted", "task received")
    bodies = [b for _, b in await PostgresTaskStore(pool).events_after(t, 0)]
    assert [b.get("name") or b.get("state") for b in bodies] == ["plan", "submitted"]


async def test_a_task_without_items_has_no_plan(pool: Pool) -> None:
    t = (await submit(pool, 0)).row.task_id
    row = await task(pool, t)
    assert row["plan"] is None and row["event_seq"] == 1


async def test_a_repeated_message_id_returns_its_task_and_stores_nothing(pool: Pool) -> None:
    first = await submit(pool, message_id="m1", digest="d1")
    same = await submit(pool, message_id="m1", digest="d1", goal="other")
    reused = await submit(pool, message_id="m1", digest="d2")
    assert same.repeated and same.same_message and same.row.task_id == first.row.task_id
    assert reused.repeated and not reused.same_message
    assert len(await rows(pool, "SELECT 1 FROM tasks")) == 1
    async with read(pool) as conn:  # a claim older than digests: taken as the same message
        await conn.execute("UPDATE messages SET digest = '' WHERE message_id = 'm1'")
    assert (await submit(pool, message_id="m1", digest="d3")).same_message
    assert not (await submit(pool, message_id="m1", owner="other")).repeated  # per owner


async def test_a_rejection_is_recorded_with_its_reason(pool: Pool) -> None:
    made = await submit(pool, rejection="the plan is not valid")
    assert (made.row.state, made.row.status_text) == ("rejected", "the plan is not valid")
    moves = await rows(
        pool,
        "SELECT from_state, to_state, reason FROM transitions WHERE task_id = %s ORDER BY seq",
        made.row.task_id,
    )
    assert [(m["from_state"], m["to_state"]) for m in moves] == [
        (None, "submitted"),
        ("submitted", "rejected"),
    ]


async def test_the_messages_files_are_kept(pool: Pool) -> None:
    inputs = [
        InputFile("a", "text/plain", "a.txt", 2, "h1", body=b"hi"),
        InputFile("b", "text/plain", None, 9, "h2", url="https://example.com/b"),
    ]
    t = (await submit(pool, inputs=inputs)).row.task_id
    kept = await rows(
        pool, "SELECT name, kind, body, url FROM task_files WHERE task_id = %s ORDER BY name", t
    )
    assert [(k["kind"], k["body"] and bytes(k["body"]), k["url"]) for k in kept] == [
        ("input", b"hi", None),
        ("input", None, "https://example.com/b"),
    ]


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("missing", "not_found"),
        ("working", "not_ended"),
        ("no_checkpoint", "no_workspace"),
        ("other_owner", "not_found"),
    ],
)
async def test_a_seed_from_a_task_that_cannot_give_one_is_refused(
    pool: Pool, source: str, why: str
) -> None:
    if source == "missing":
        from_id = "nope"
    elif source == "working":
        from_id = (await submit(pool)).row.task_id
    elif source == "no_checkpoint":
        from_id = await ended(pool, shas=0)
    else:
        from_id = await ended(pool, owner="someone else")
    with pytest.raises(CannotContinue) as refused:
        await submit(pool, seed_from=from_id, message_id="m-seed")
    assert (refused.value.why, refused.value.task_id) == (why, from_id)
    assert refused.value.named_by == "workspace.fromTask"
    # Nothing kept: the messageId is free again.
    assert not (await submit(pool, message_id="m-seed")).repeated


async def test_a_seed_from_an_ended_task_starts_from_its_checkpoint(pool: Pool) -> None:
    cloned = await ended(pool, shas=2, seed=GIT)
    seeded = (await submit(pool, seed_from=cloned)).row.task_id
    row = await task(pool, seeded)
    assert row["seed"] == {"kind": "from_task", "task_id": cloned, "commit": "sha1", "origin": GIT}
    assert (row["checkpoint_sha"], row["base_sha"]) == ("sha1", "sha1")
    assert row["metadata"]["workspace"] == {
        "source": "from_task",
        "task_id": cloned,
        "start_commit": "sha1",
    }
    copied = await rows(
        pool, "SELECT seq, sha FROM checkpoints WHERE task_id = %s ORDER BY seq", seeded
    )
    assert copied == [{"seq": 1, "sha": "sha0"}, {"seq": 2, "sha": "sha1"}]
    # A seed from a seeded task keeps the clone's origin.
    await recorded(
        PostgresRunStore(pool),
        seeded,
        StepRecord(f"{seeded}:end", "end", {}, task_state="completed"),
    )
    again = (await submit(pool, seed_from=seeded)).row.task_id
    assert (await task(pool, again))["seed"]["origin"] == GIT


async def test_a_view_of_a_parent_copies_its_workspace_when_it_has_one(pool: Pool) -> None:
    parent = (await submit(pool, seed=GIT)).row.task_id
    bare = (await submit(pool, view_of=parent, parent_id=parent, seed={"kind": "empty"})).row
    assert (await task(pool, bare.task_id))["seed"] == {"kind": "empty"}
    assert "workspace" not in bare.metadata
    await recorded(
        PostgresRunStore(pool),
        parent,
        StepRecord(f"{parent}:c", "c", {}, checkpoint=Checkpoint("p1", b"b")),
    )
    view = (await submit(pool, view_of=parent, parent_id=parent)).row.task_id
    row = await task(pool, view)
    assert row["parent_id"] == parent and row["checkpoint_sha"] == "p1"
    assert row["seed"] == {"kind": "from_task", "task_id": parent, "commit": "p1", "origin": GIT}
    assert row["metadata"]["workspace"]["start_commit"] == "p1"
    assert await rows(pool, "SELECT sha FROM checkpoints WHERE task_id = %s", view) == [
        {"sha": "p1"}
    ]


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("missing", "not_found"),
        ("working", "not_ended"),
        ("no_items", "no_plan"),
        ("other_owner", "not_found"),
    ],
)
async def test_a_continuation_of_a_task_that_cannot_be_continued_is_refused(
    pool: Pool, source: str, why: str
) -> None:
    if source == "missing":
        from_id = "nope"
    elif source == "working":
        from_id = (await submit(pool)).row.task_id
    elif source == "no_items":
        from_id = await ended(pool, 0)
    else:
        from_id = await ended(pool, owner="someone else")
    with pytest.raises(CannotContinue) as refused:
        await submit(pool, continue_from=from_id, message_id="m-cont")
    assert refused.value.why == why and refused.value.named_by == "referenceTaskIds"
    assert not (await submit(pool, message_id="m-cont")).repeated


async def test_a_continuation_keeps_what_was_done_and_starts_the_rest_afresh(
    pool: Pool,
) -> None:
    earlier = await ended(pool, 3, done=2, shas=1, goal="the goal", policy={"p": 1})
    made = await submit(pool, 5, continue_from=earlier, goal="ignored")
    t = made.row.task_id
    row = await task(pool, t)
    assert (row["goal"], row["policy"], row["checkpoint_sha"]) == ("the goal", {"p": 1}, "commit1")
    assert row["metadata"]["continues"] == {
        "task_id": earlier,
        "checkpoint": "commit1",
        "items_done": 2,
    }
    assert row["seed"]["kind"] == "from_task" and row["seed"]["commit"] == "commit1"
    items = await rows(
        pool,
        "SELECT item_id, status, attempts, evidence, commit_sha, history"
        " FROM items WHERE task_id = %s ORDER BY position",
        t,
    )
    assert [(i["item_id"], i["status"], i["attempts"], i["commit_sha"]) for i in items] == [
        ("i0", "done", 1, "commit0"),
        ("i1", "done", 1, "commit1"),
        ("i2", "pending", 0, None),
    ]
    assert items[0]["history"] == [{"attempt": 1}] and items[2]["history"] == []
    [first] = await rows(pool, "SELECT reason FROM transitions WHERE task_id = %s", t)
    assert f"continues task {earlier} from checkpoint commit1 (2 item(s)" in first["reason"]
    assert (await task(pool, earlier))["metadata"]["continued_by"] == [t]
    assert await rows(pool, "SELECT sha FROM checkpoints WHERE task_id = %s", t) == [
        {"sha": "sha0"}
    ]


async def test_a_continuation_of_nothing_verified_starts_at_the_first_checkpoint(
    pool: Pool,
) -> None:
    earlier = await ended(pool, shas=2, policy={"p": 1})
    t = (await submit(pool, continue_from=earlier, policy={"own": True})).row.task_id
    row = await task(pool, t)
    assert (row["checkpoint_sha"], row["policy"]) == ("sha0", {"own": True})
    assert row["metadata"]["continues"]["items_done"] == 0


async def test_a_submission_of_older_code_is_refused_as_an_outage(pool: Pool) -> None:
    """An edge of the release before views (items without views, no summary) still running
    in a roll: refused as an outage (its caller is told to retry), nothing stored."""
    older = {
        "task_id": "old-1",
        "owner": "o",
        "context_id": "c",
        "goal": "g",
        "first_message": {},
        "message_id": "m-old",
        "digest": "",
        "items": [{"item_id": "i0", "title": "t", "verify_command": "true"}],
    }
    with pytest.raises(StoreUnavailable):
        async with read(pool) as conn:
            await conn.execute(q("create_task"), {"task": jsonb(older)})
    assert await rows(pool, "SELECT id FROM tasks WHERE id = 'old-1'") == []
    assert await rows(pool, "SELECT 1 FROM messages WHERE message_id = 'm-old'") == []


async def test_text_the_driver_cannot_send_is_invalid_data_not_a_crash(pool: Pool) -> None:
    """A lone surrogate (JSON's "\\ud800") cannot be encoded as UTF-8: the driver raised
    UnicodeEncodeError, which passed the store's translation (a 500 at the door)."""
    with pytest.raises(InvalidData, match="not Unicode"):
        await PostgresTaskStore(pool).get_task("\ud800", None)


class _Undone(Exception):
    """Rolls back the transaction it leaves."""


async def _as_apply_task_change_makes_it(pool: Pool, task_id: str) -> dict[str, Any]:
    """The task's plan and metadata as apply_task_change() assembles them from the stored
    rows (the items and their views, the budget ledger), in a transaction rolled back."""
    remade: dict[str, Any] = {}
    with pytest.raises(_Undone):
        async with transaction(pool) as conn:
            await conn.execute(
                "SELECT apply_task_change(id, %s, transition_seq, event_seq) FROM tasks "
                "WHERE id = %s",
                (jsonb({"items_changed": True, "charged": True}), task_id),
            )
            cur = await conn.execute("SELECT plan, metadata FROM tasks WHERE id = %s", (task_id,))
            remade.update(await cur.fetchone() or {})
            raise _Undone
    return remade


def _still(metadata: dict[str, Any]) -> dict[str, Any]:
    """metadata without the run's age, which the clock moves between two readings."""
    wall = {k: v for k, v in metadata["budget"]["wall_s"].items() if k not in ("used", "age")}
    return {**metadata, "budget": {**metadata["budget"], "wall_s": wall}}


@pytest.mark.parametrize("kind", ["plain", "no items", "rejected", "budget", "continuation"])
async def test_the_row_written_once_is_what_every_change_makes_of_it(pool: Pool, kind: str) -> None:
    """create_task() writes a new task's row once, its plan artifact made from the items as
    given and its metadata.budget from its limits alone; every later change assembles both
    from the stored rows (apply_task_change()). Over the same new task the two agree."""
    if kind == "continuation":
        earlier = await ended(pool, 3, done=1)
        made = await submit(pool, continue_from=earlier)
    else:
        kinds: dict[str, dict[str, Any]] = {
            "plain": {},
            "no items": {"items": 0},
            "rejected": {"rejection": "the plan is not valid"},
            "budget": {"budget": {"max_usd": 2.5, "max_actions": {"bash": 3, "*": 10}}},
        }
        fields = dict(kinds[kind])
        made = await submit(pool, fields.pop("items", 2), **fields)
    row = await task(pool, made.row.task_id)
    remade = await _as_apply_task_change_makes_it(pool, made.row.task_id)
    assert row["plan"] == remade["plan"]
    assert _still(row["metadata"]) == _still(remade["metadata"])
    assert row["metadata"]["budget"]["wall_s"]["used"] == 0
    events = await rows(pool, "SELECT seq, body FROM events WHERE task_id = %s", row["id"])
    assert [e["seq"] for e in events] == list(range(1, row["event_seq"] + 1))
    assert events[-1]["body"]["state"] == row["state"]
    if row["plan"] is not None:
        assert events[0]["body"] == {"kind": "artifact", "name": "plan", "data": row["plan"]}
    transitions = await rows(pool, "SELECT seq FROM transitions WHERE task_id = %s", row["id"])
    assert len(transitions) == row["transition_seq"]
