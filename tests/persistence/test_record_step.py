"""`record_step()` (functions.sql), branch by branch, on a real database: each test drives
one path of the function through `PostgresRunStore.record_step` and checks the rows it wrote.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString

import pytest
from cryptography.fernet import Fernet

from persistence.db import Pool, read
from persistence.errors import NotFound, StoreUnavailable
from persistence.push import PostgresPushStore, PushConfig
from persistence.records import (
    Charge,
    Checkpoint,
    EffectStart,
    Fact,
    ItemChange,
    ModelCall,
    NewDelegation,
    NewItem,
    OutputFile,
    PauseRequest,
    StepRecord,
    Transition,
)
from persistence.runs import PostgresRunStore
from persistence.safe import jsonb
from persistence.secrets import SecretBox
from persistence.sql import q
from persistence.watch import PostgresWatchdogStore
from tests.persistence.rows import made, recorded, rows, task


def step(task_id: str, name: str, **changes: Any) -> StepRecord:
    changes.setdefault("result", {"of": name})
    return StepRecord(effect_key=f"{task_id}:{name}", step=name, **changes)


def pick(row: dict[str, Any], *keys: str) -> tuple[Any, ...]:
    return tuple(row[k] for k in keys)


async def test_a_missing_task_is_not_found(pool: Pool) -> None:
    with pytest.raises(NotFound):
        await PostgresRunStore(pool).record_step("nope", step("nope", "begin"), ())


async def test_a_completed_effect_replays_its_result_and_writes_nothing(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    first = step(
        t,
        "run",
        charge=Charge("command", actions=1),
        transitions=[Transition("working", "begun")],
        task_state="working",
    )
    await recorded(runs, t, first)
    before = await task(pool, t)
    again = await recorded(
        runs,
        t,
        step(
            t,
            "run",
            result={"other": 1},
            charge=Charge("command", actions=5),
            transitions=[Transition("failed", "again")],
            task_state="failed",
        ),
    )
    assert again.replayed and again.result == {"of": "run"} and again.task_state == "working"
    assert [i.item_id for i in again.items] == ["i0", "i1"]  # all items, for the render
    after = await task(pool, t)
    seqs = ("transition_seq", "event_seq")
    assert pick(after, *seqs) == pick(before, *seqs) and after["state"] == "working"
    charged = await rows(pool, "SELECT actions FROM budget_charges WHERE key = %s", f"{t}:run")
    assert charged == [{"actions": 1}]


async def test_a_charge_is_dated_by_its_transitions_and_shows_in_the_budget(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    await recorded(
        runs,
        t,
        step(
            t,
            "tool",
            charge=Charge("tool", tokens=7, usd=0.25, actions=1, tool="bash"),
            transitions=[Transition("in_progress", "ran", "i0", 1, at=earlier)],
        ),
    )
    [charge] = await rows(pool, "SELECT * FROM budget_charges WHERE task_id = %s", t)
    assert pick(charge, "kind", "tool", "tokens", "actions") == ("tool", "bash", 7, 1)
    assert charge["at"] == earlier  # no later than the step's own transitions
    budget = (await task(pool, t))["metadata"]["budget"]
    assert budget["tokens"]["used"] == 7 and budget["actions_by_tool"]["bash"]["used"] == 1


async def test_a_charge_replaces_a_reservation_under_its_key_but_no_real_charge(
    pool: Pool,
) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    async with read(pool) as conn:
        await conn.execute(
            "INSERT INTO budget_charges (key, task_id, kind, tokens) VALUES"
            " (%s, %s, 'reservation', 1000), (%s, %s, 'model', 3)",
            (f"{t}:reserved", t, f"{t}:charged", t),
        )
    for name in ("reserved", "charged"):
        await recorded(runs, t, step(t, name, charge=Charge("model", tokens=50)))
    charges = await rows(
        pool, "SELECT key, kind, tokens FROM budget_charges WHERE task_id = %s ORDER BY key", t
    )
    assert [(c["kind"], c["tokens"]) for c in charges] == [("model", 3), ("model", 50)]


async def test_a_childs_charge_reaches_every_ancestor_but_a_reservation_does_not(
    pool: Pool,
) -> None:
    runs = PostgresRunStore(pool)
    top = await made(pool)
    middle = await made(pool, parent_id=top)
    child = await made(pool, parent_id=middle)
    await recorded(runs, child, step(child, "model", charge=Charge("model", tokens=11)))
    await recorded(runs, child, step(child, "held", charge=Charge("reservation", tokens=99)))
    ancestors = await rows(
        pool,
        "SELECT key, task_id, kind, tokens FROM budget_charges WHERE kind = 'child' ORDER BY key",
    )
    assert [(a["key"], a["task_id"], a["tokens"]) for a in ancestors] == sorted(
        [(f"{child}:model@{middle}", middle, 11), (f"{child}:model@{top}", top, 11)]
    )
    assert (await task(pool, top))["metadata"]["budget"]["tokens"]["used"] == 11


async def test_on_an_ended_task_only_the_effect_and_its_charge_are_kept(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, step(t, "end", task_state="completed", report={"r": 1}))
    before = await task(pool, t)
    late = step(
        t,
        "late",
        charge=Charge("tool", actions=1, tool="bash"),
        task_state="working",
        item=ItemChange("i0", "done", 1),
        report={"r": 2},
        transitions=[Transition("working", "late")],
        then=EffectStart(f"{t}:next", "next", None, None),
    )
    outcome = await recorded(runs, t, late)
    assert outcome.task_state == "completed" and outcome.transitions == []
    after = await task(pool, t)
    assert pick(after, "state", "report") == ("completed", {"r": 1})
    assert after["transition_seq"] == before["transition_seq"]
    assert [
        r["status"]
        for r in await rows(
            pool, "SELECT status FROM items WHERE task_id = %s ORDER BY position", t
        )
    ] == ["pending", "pending"]
    effects = await rows(pool, "SELECT key, status FROM effects WHERE task_id = %s", t)
    assert {e["key"]: e["status"] for e in effects} == {
        f"{t}:end": "completed",
        f"{t}:late": "completed",
    }
    assert len(await rows(pool, "SELECT 1 FROM budget_charges WHERE task_id = %s", t)) == 1


async def test_the_closing_record_writes_on_an_ended_task(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, step(t, "cancel", task_state="canceled"))
    closing = step(
        t,
        "close",
        closing=True,
        report={"closed": True},
        transitions=[Transition("canceled", "record closed")],
        checkpoint=Checkpoint("c1", b"bundle"),
    )
    outcome = await recorded(runs, t, closing)
    assert [tr.from_state for tr in outcome.transitions] == ["canceled"]
    row = await task(pool, t)
    assert pick(row, "state", "report", "checkpoint_sha") == ("canceled", {"closed": True}, "c1")


async def test_a_pause_is_a_row_shown_in_the_status_and_asked_once(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    ask = PauseRequest("q1", "question", "Which?", ["a", "b"], "a", 3600.0, {"why": "x"}, "i0", 1)
    await recorded(runs, t, step(t, "ask", pause=ask, task_state="input_required"))
    again = PauseRequest("q1", "question", "Changed?", ["c"], "c", 60.0)
    await recorded(runs, t, step(t, "ask2", pause=again))
    [pause] = await rows(pool, "SELECT * FROM pauses WHERE task_id = %s", t)
    assert pick(pause, "summary", "options", "item_id") == ("Which?", ["a", "b"], "i0")
    assert pause["details"] == {"why": "x"}
    assert pause["expires_at"] - pause["requested_at"] == pytest.approx(
        timedelta(hours=1), abs=timedelta(seconds=5)
    )
    row = await task(pool, t)
    assert row["state"] == "input_required"
    assert row["status_data"]["approval_request"]["id"] == "q1"
    assert [d["id"] for d in row["plan"]["decisions"]] == ["q1"]


async def test_a_delegation_is_a_row_in_the_metadata(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    handed = NewDelegation("d1", "do it", "i0", 1, peer="p", remote_id="r1", remote_state="working")
    await recorded(runs, t, step(t, "send", delegation=handed))
    [row] = await rows(pool, "SELECT * FROM delegations WHERE task_id = %s", t)
    assert pick(row, "state", "peer", "remote_id", "item_id") == ("pending", "p", "r1", "i0")
    [shown] = (await task(pool, t))["metadata"]["delegations"]
    assert (shown["id"], shown["remote_task"]) == ("d1", "r1")


async def test_a_child_that_asked_before_its_delegation_was_recorded_is_caught_up(
    pool: Pool,
) -> None:
    runs = PostgresRunStore(pool)
    parent = await made(pool)
    await recorded(runs, parent, step(parent, "begin", task_state="working"))
    child = await made(pool, parent_id=parent)
    await recorded(
        runs,
        child,
        step(
            child,
            "ask",
            task_state="input_required",
            pause=PauseRequest("q", "question", "ok?", ["yes"], "yes", 60.0),
        ),
    )
    await recorded(
        runs, parent, step(parent, "send", delegation=NewDelegation("d1", "sub", child_id=child))
    )
    pauses = await rows(pool, "SELECT id, kind FROM pauses WHERE task_id = %s", parent)
    assert pauses == [{"id": "via.d1.q", "kind": "delegated_request"}]
    assert (await task(pool, parent))["state"] == "input_required"


async def test_facts_are_kept_once_per_key_and_shown(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, step(t, "f1", facts=[Fact("port", "80", "i0", "cat port", 60)]))
    await recorded(runs, t, step(t, "f2", facts=[Fact("port", "81", "i1")]))
    [fact] = await rows(pool, "SELECT * FROM facts WHERE task_id = %s", t)
    assert (fact["value"], fact["source"], fact["check_command"]) == ("81", "i1", None)
    shown = (await task(pool, t))["metadata"]["facts"]
    assert shown["port"]["value"] == "81" and shown["port"]["source"] == "i1"


async def test_new_items_go_after_the_plan_and_come_back_whole(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool, items=1)
    added = [
        NewItem("n1", "one", None, "test 1", 9, 3, irreversible=True),
        NewItem("n2", "two", "make", "test 2", 9, 1, precheck=False),
    ]
    outcome = await recorded(runs, t, step(t, "plan", new_items=added, first_position=1))
    assert [(i.item_id, i.position) for i in outcome.items] == [("i0", 0), ("n1", 1), ("n2", 2)]
    assert outcome.items[1].irreversible and not outcome.items[2].precheck
    assert [i["id"] for i in (await task(pool, t))["plan"]["items"]] == ["i0", "n1", "n2"]


async def test_an_item_change_and_more_items_update_their_rows(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    await recorded(runs, t, step(t, "s1", item=ItemChange("i0", "in_progress", 1, {"e": 1})))
    [started] = await rows(pool, "SELECT started_at FROM items WHERE item_id = 'i0'")
    change = ItemChange(
        "i0",
        "in_progress",
        2,
        None,
        "sha",
        1,
        [{"attempt": 1}],
        {"title": "new", "run": None, "run_timeout_s": 9},
    )
    outcome = await recorded(
        runs, t, step(t, "s2", item=change, more_items=[ItemChange("i1", "skipped", 0)])
    )
    by_id = {i.item_id: i for i in outcome.changed_items}
    i0 = by_id["i0"]
    assert (i0.title, i0.run, i0.run_timeout_s, i0.verify_command) == ("new", None, 9, "true")
    assert (i0.evidence, i0.commit_sha, i0.failures, i0.history) == (
        {"e": 1},
        "sha",
        1,
        [{"attempt": 1}],
    )
    assert by_id["i1"].status == "skipped"
    [again] = await rows(pool, "SELECT started_at FROM items WHERE item_id = 'i0'")
    assert again == started and started["started_at"] is not None  # the first attempt's
    assert (await task(pool, t))["metadata"]["progress"]["items_skipped"] == 1


# The plan artifact assembled from every item's row, as apply_task_change() does when it
# cannot take the changed items where the plan has them.
PLAN_ANEW: LiteralString = """
SELECT jsonb_build_object(
           'goal', t.goal,
           'items', (SELECT coalesce(jsonb_agg(i.view || jsonb_build_object('history', i.history)
                                               ORDER BY i.position), '[]'::jsonb)
                     FROM items i WHERE i.task_id = t.id),
           'decisions', t.plan -> 'decisions') AS plan
FROM tasks t WHERE t.id = %s
"""


async def plan_anew(pool: Pool, task_id: str) -> Any:
    return (await rows(pool, PLAN_ANEW, task_id))[0]["plan"]


async def test_the_plan_takes_changed_items_where_it_has_them(pool: Pool) -> None:
    """A step that changes items in place puts each where the plan shows it; the artifact is
    what assembling it from every row gives, step after step, new items and requests too."""
    runs, t = PostgresRunStore(pool), await made(pool, items=3)
    steps = [
        step(t, "a", item=ItemChange("i1", "in_progress", 1, history=[{"a": 1}])),
        step(t, "b", item=ItemChange("i1", "done", 1, commit_sha="c1", history=[{"a": 2}])),
        step(
            t,
            "c",
            item=ItemChange("i2", "in_progress", 1),
            more_items=[ItemChange("i0", "skipped", 0)],
        ),
        step(t, "d", new_items=[NewItem("n1", "new", "true", "true", 5, 2)], first_position=3),
        step(t, "e", item=ItemChange("n1", "in_progress", 1, history=[{"n": 1}])),
        step(
            t,
            "f",
            item=ItemChange("i2", "verifying", 1),
            task_state="input_required",
            pause=PauseRequest(
                "p1", "irreversible_action", "may it?", ["yes"], "deny", 60, item_id="i2"
            ),
        ),
    ]
    for made_step in steps:
        await recorded(runs, t, made_step)
        assert (await task(pool, t))["plan"] == await plan_anew(pool, t), made_step.step
    plan = (await task(pool, t))["plan"]
    assert [(i["id"], i["status"]) for i in plan["items"]] == [
        ("i0", "skipped"),
        ("i1", "done"),
        ("i2", "verifying"),
        ("n1", "in_progress"),
    ]
    assert [d["id"] for d in plan["decisions"]] == ["p1"]
    # An item written behind the functions' back stays as the plan had it while others
    # change in place: the plan was not assembled anew.
    async with read(pool) as conn:
        await conn.execute(
            "UPDATE items SET view = view || '{\"title\": \"behind\"}' WHERE item_id = 'i0'"
        )
    await recorded(runs, t, step(t, "g", item=ItemChange("n1", "verifying", 1)))
    assert (await task(pool, t))["plan"]["items"][0]["title"] == "item 0"
    assert (await plan_anew(pool, t))["items"][0]["title"] == "behind"


async def test_outputs_and_checkpoints_are_kept(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    for n, body in enumerate([b"first", b"second"], start=1):
        await recorded(
            runs,
            t,
            step(
                t,
                f"out{n}",
                checkpoint=Checkpoint(f"c{n}", body),
                outputs=[OutputFile("diff", "text/x-diff", "a.diff", body)],
            ),
        )
    [out] = await rows(pool, "SELECT * FROM task_files WHERE task_id = %s", t)
    assert (out["kind"], bytes(out["body"]), out["size"]) == ("output", b"second", 6)
    kept = await rows(pool, "SELECT seq, sha FROM checkpoints WHERE task_id = %s ORDER BY seq", t)
    assert kept == [{"seq": 1, "sha": "c1"}, {"seq": 2, "sha": "c2"}]
    assert (await task(pool, t))["checkpoint_sha"] == "c2"


async def test_a_model_call_is_a_row_of_its_effect(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    call = ModelCall("work", "m1", "end_turn", 10, 20, 3, 4)
    await recorded(runs, t, step(t, "model", model_call=call, item_id="i1", attempt=2))
    [row] = await rows(pool, "SELECT * FROM model_calls WHERE task_id = %s", t)
    assert pick(row, "key", "item_id", "attempt") == (f"{t}:model", "i1", 2)
    assert pick(row, "model", "output_tokens") == ("m1", 20)


async def test_the_task_change_carries_the_records_fields(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    record = step(
        t,
        "begin",
        task_state="working",
        fingerprint="fp",
        base_sha="base",
        metadata_patch={"m": 1},
        policy_patch={"p": 2},
        seed_patch={"commit": "c"},
        transitions=[Transition("working", "started"), Transition("in_progress", "go", "i0", 1)],
    )
    outcome = await recorded(runs, t, record)
    assert [(tr.seq, tr.from_state) for tr in outcome.transitions] == [(2, "submitted"), (3, None)]
    await recorded(runs, t, step(t, "quiet", task_state="working"))  # no status text given
    row = await task(pool, t)
    assert row["status_text"] == "Accepted; waiting for a worker."  # kept as it was
    assert pick(row, "workspace_fingerprint", "base_sha", "seed") == ("fp", "base", {"commit": "c"})
    assert row["metadata"]["m"] == 1 and row["policy"] == {"p": 2}


async def test_the_effect_completes_and_marks_the_next_one_started(pool: Pool) -> None:
    runs, t = PostgresRunStore(pool), await made(pool)
    began = datetime.now(UTC) - timedelta(seconds=30)
    await recorded(
        runs,
        t,
        step(
            t,
            "run",
            runs=2,
            started_at=began,
            item_id="i0",
            attempt=1,
            then=EffectStart(f"{t}:verify", "verify", "i0", 1),
        ),
    )
    effects = {e["key"]: e for e in await rows(pool, "SELECT * FROM effects")}
    run, verify = effects[f"{t}:run"], effects[f"{t}:verify"]
    assert pick(run, "status", "runs", "started_at") == ("completed", 2, began)
    assert run["result"] == {"of": "run"}
    assert (verify["status"], verify["runs"], verify["item_id"]) == ("started", 0, "i0")
    # The marked effect completes under its key: its start stays when the record gives none,
    # and a `then` naming a completed effect leaves it completed.
    await recorded(runs, t, step(t, "verify", then=EffectStart(f"{t}:run", "run", "i0", 1)))
    effects = {e["key"]: e for e in await rows(pool, "SELECT * FROM effects")}
    assert effects[f"{t}:verify"]["status"] == "completed"
    assert effects[f"{t}:verify"]["started_at"] == verify["started_at"]
    assert effects[f"{t}:verify"]["runs"] == 1
    assert effects[f"{t}:run"]["status"] == "completed"


async def test_a_step_of_older_code_is_refused_as_an_outage_and_writes_nothing(
    pool: Pool,
) -> None:
    """A process of the release before views, still running in a roll, records an item change
    as a patch (no rows, no views, no summary). The functions refuse it with SQLSTATE 57000,
    which that code's store turns into StoreUnavailable and its steps retry (an outage),
    until the process is replaced and the step runs again on the new release."""
    t = await made(pool)
    before = await task(pool, t)
    older = {
        "effect_key": f"{t}:old",
        "step": "verify",
        "result": {},
        "item": {"item_id": "i0", "status": "done", "attempts": 1, "evidence": None},
        "transitions": [],
        "task_state": "working",
    }
    with pytest.raises(StoreUnavailable):
        async with read(pool) as conn:
            await conn.execute(
                q("record_step"), {"task_id": t, "step": jsonb(older), "bundle": None}
            )
    assert await task(pool, t) == before
    assert await rows(pool, "SELECT key FROM effects WHERE task_id = %s", t) == []
    items = await rows(pool, "SELECT status FROM items WHERE task_id = %s", t)
    assert {r["status"] for r in items} == {"pending"}


async def plan_events(pool: Pool, task_id: str, after: int = 0, limit: int | None = None) -> Any:
    """Plan events as readers take them (`task_events()`): {seq: plan}."""
    found = await rows(
        pool,
        "SELECT seq, body FROM task_events(%s, %s, %s) WHERE body ->> 'name' = 'plan'",
        task_id,
        after,
        limit,
    )
    return {r["seq"]: r["body"]["data"] for r in found}


async def test_a_plan_event_keeps_its_changes_and_is_read_whole(pool: Pool) -> None:
    """An item changed in place writes an event of that item alone (a 200-item plan wrote
    its whole plan, every history in it, on every step); every plan event reads back as the
    plan the task had right after it, whichever event a reader starts after, and one in so
    many holds the plan whole again, so a reader builds from a bounded number of changes."""
    runs, t = PostgresRunStore(pool), await made(pool, items=3)
    every = (await rows(pool, "SELECT plan_full_every() AS n"))[0]["n"]
    expected = {1: (await task(pool, t))["plan"]}
    for n in range(every + 6):
        if n == 5:  # new items: the plan is assembled anew, and held whole
            added = [NewItem("n1", "new", "true", "true", 5, 2)]
            change = step(t, f"s{n}", new_items=added, first_position=3)
        else:
            status = ("in_progress", "verifying", "done")[n % 3]
            history = [{"step": k} for k in range(n)]
            change = step(t, f"s{n}", item=ItemChange(f"i{n % 3}", status, 1, history=history))
        await recorded(runs, t, change)
        row = await task(pool, t)
        expected[row["plan_seq"]] = row["plan"]
    stored = {
        r["seq"]: r["body"]
        for r in await rows(
            pool,
            "SELECT seq, body FROM events WHERE task_id = %s"
            " AND (body ->> 'name' = 'plan' OR body ->> 'kind' = 'plan_changes')",
            t,
        )
    }
    assert sorted(stored) == sorted(expected)
    whole = sorted(seq for seq, body in stored.items() if body["kind"] == "artifact")
    changes_only = [body for body in stored.values() if body["kind"] == "plan_changes"]
    # Whole: the submission's, the one new items made, and the bounded chain's.
    assert len(whole) == 3 and whole[0] == 1, whole
    assert len(changes_only) == len(stored) - 3
    assert all(len(body["changes"]) == 1 and "data" not in body for body in changes_only)
    assert all(b - a <= every for a, b in zip(whole, [*whole[1:], max(stored) + 1], strict=True))
    # Read whole, from the start and from after every event (a window that starts in the
    # middle of a chain of changes builds from its whole one), one at a time or all.
    assert await plan_events(pool, t) == expected
    for after in range(max(stored)):
        window = {seq: plan for seq, plan in expected.items() if seq > after}
        assert await plan_events(pool, t, after) == window, after
        first = min(window)
        assert await plan_events(pool, t, first - 1, 1) == {first: window[first]}, after
    # One event's body, as the 0.3 push's cursor reads its last plan event.
    for seq, plan in expected.items():
        body = (
            await rows(
                pool,
                "SELECT event_body(%s, %s, body) AS b FROM events WHERE task_id = %s AND seq = %s",
                t,
                seq,
                t,
                seq,
            )
        )[0]["b"]
        assert body == {"kind": "artifact", "name": "plan", "data": plan}, seq


async def test_a_push_cursor_reads_plan_changes_whole(pool: Pool) -> None:
    """What a deliverer claims: the events after the cursor (each plan event whole), and for
    an A2A 0.3 receiver the task as of the cursor, its plan built from the changes up to
    it; a config registered in the middle of a chain of changes starts from there."""
    runs, t = PostgresRunStore(pool), await made(pool, items=3)
    plans = {1: (await task(pool, t))["plan"]}
    for n in range(6):
        status = ("in_progress", "verifying", "done")[n % 3]
        await recorded(runs, t, step(t, f"s{n}", item=ItemChange(f"i{n % 3}", status, 1)))
        row = await task(pool, t)
        plans[row["plan_seq"]] = row["plan"]
    kinds = await rows(pool, "SELECT body ->> 'kind' AS kind FROM events WHERE task_id = %s", t)
    assert sum(k["kind"] == "plan_changes" for k in kinds) == 6
    cursor = sorted(plans)[3]  # the cursor on the third change's event
    store = PostgresPushStore(pool, SecretBox(Fernet.generate_key()))
    for protocol in ("0.3", "1.0"):
        config = PushConfig(t, f"hook-{protocol}", "https://example.org/hook", protocol=protocol)
        await store.put(config, "owner-1", from_seq=cursor)
    claimed = {c.config.protocol: c for c in await store.claim(10, 60, 100)}
    assert set(claimed) == {"0.3", "1.0"}
    for got in claimed.values():
        sent = {e.seq: e.body["data"] for e in got.events if e.body.get("name") == "plan"}
        assert sent == {seq: plan for seq, plan in plans.items() if seq > cursor}
        assert all(e.body["kind"] != "plan_changes" for e in got.events)
    base = [e.body for e in claimed["0.3"].base if e.body.get("name") == "plan"]
    assert base == [{"kind": "artifact", "name": "plan", "data": plans[cursor]}]
    assert claimed["1.0"].base == []


async def test_a_compacted_task_keeps_no_base_for_plan_changes(pool: Pool) -> None:
    # Compaction deletes a task's events: its row must not name a whole plan event to build
    # on any more, so any plan event after it would hold the plan whole.
    runs, t = PostgresRunStore(pool), await made(pool, items=2)
    await recorded(runs, t, step(t, "a", item=ItemChange("i0", "in_progress", 1)))
    await recorded(runs, t, step(t, "b", task_state="completed", closing=True))
    assert (await task(pool, t))["plan_full_seq"] == 1
    assert [t] == [i for i, _ in await PostgresWatchdogStore(pool).compact_tasks(0, 10)]
    row = await task(pool, t)
    assert row["compacted_at"] is not None and row["plan_full_seq"] is None
    assert await rows(pool, "SELECT seq FROM task_events(%s, 0, NULL)", t) == []
