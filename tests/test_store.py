"""The store against real PostgreSQL: one transaction per call, idempotent by effect key."""

from __future__ import annotations

import uuid

import pytest

from persistence.db import Pool
from persistence.errors import Conflict, NotFound, StoreError
from persistence.ledger import PostgresLedger
from persistence.records import ItemChange, NewItem, NewTask, StepRecord, Transition
from persistence.runs import PostgresRunStore
from persistence.tasks import PostgresTaskStore
from tests.persistence.rows import recorded


@pytest.fixture
def store(pool: Pool) -> PostgresTaskStore:
    return PostgresTaskStore(pool)


@pytest.fixture
def runs(pool: Pool) -> PostgresRunStore:
    return PostgresRunStore(pool)


def new_task(owner: str = "", context_id: str = "ctx", items: int = 2) -> NewTask:
    return NewTask(
        task_id=str(uuid.uuid4()),
        owner=owner,
        context_id=context_id,
        goal="goal",
        first_message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        items=[
            NewItem(
                item_id=f"i{n}",
                title=f"item {n}",
                run="true",
                verify_command="true",
                verify_timeout_s=5,
                max_attempts=2,
            )
            for n in range(items)
        ],
    )


async def test_create_writes_task_items_transition_and_event(
    store: PostgresTaskStore, runs: PostgresRunStore
) -> None:
    row = (await store.create_task(new_task())).row
    assert row.state == "submitted" and row.event_seq == 2  # plan artifact + status
    assert row.plan is not None and [i["status"] for i in row.plan["items"]] == ["pending"] * 2
    assert row.metadata["progress"]["items_total"] == 2
    transitions = await runs.transitions(row.task_id)
    assert [(t.seq, t.to_state) for t in transitions] == [(1, "submitted")]
    events = await store.events_after(row.task_id, 0)
    assert [body["kind"] for _, body in events] == ["artifact", "status"]


async def test_record_step_is_written_once_per_effect_key(
    store: PostgresTaskStore, runs: PostgresRunStore
) -> None:
    row = (await store.create_task(new_task())).row
    record = StepRecord(
        effect_key=f"{row.task_id}:i0:1:begin",
        step="begin",
        result={"n": 1},
        item=ItemChange(item_id="i0", status="in_progress", attempts=1),
        task_state="working",
        transitions=[
            Transition(from_state="submitted", to_state="working", reason="go"),
            Transition(
                item_id="i0",
                attempt=1,
                from_state="pending",
                to_state="in_progress",
                reason="start",
            ),
        ],
    )
    first = await recorded(runs, row.task_id, record)
    again = await recorded(runs, row.task_id, record)
    assert not first.replayed and again.replayed and again.result == {"n": 1}
    transitions = await runs.transitions(row.task_id)
    assert [t.seq for t in transitions] == [1, 2, 3]
    task = await store.get_task(row.task_id, "")
    assert task is not None and task.state == "working"
    assert task.metadata["progress"]["current_item"] == "i0"


async def test_started_effect_keeps_its_key_and_counts_runs(
    store: PostgresTaskStore, runs: PostgresRunStore, pool: Pool
) -> None:
    row = (await store.create_task(new_task())).row
    ledger = PostgresLedger(pool)
    key = f"{row.task_id}:i0:1:run"
    assert (await ledger.start_effect(key, row.task_id, "i0", 1, "run")).runs == 1
    assert (await ledger.start_effect(key, row.task_id, "i0", 1, "run")).runs == 2
    await recorded(runs, row.task_id, StepRecord(effect_key=key, step="run", result={"x": 1}))
    done = await ledger.start_effect(key, row.task_id, "i0", 1, "run")
    assert done.status == "completed" and done.runs == 2 and done.result == {"x": 1}


async def test_cancel_is_final_and_steps_after_it_change_nothing(
    store: PostgresTaskStore, runs: PostgresRunStore
) -> None:
    row = (await store.create_task(new_task())).row
    canceled = await store.cancel_task(row.task_id, "", "stop")
    assert canceled.state == "canceled"
    with pytest.raises(Conflict, match="already canceled"):
        await store.cancel_task(row.task_id, "", "stop")
    outcome = await recorded(
        runs,
        row.task_id,
        StepRecord(
            effect_key="late",
            step="run",
            result={},
            task_state="working",
            item=ItemChange(item_id="i0", status="in_progress", attempts=1),
            transitions=[Transition(to_state="working", reason="late")],
        ),
    )
    assert outcome.task_state == "canceled"
    task = await store.get_task(row.task_id, "")
    assert task is not None and task.state == "canceled"
    assert [t.to_state for t in await runs.transitions(row.task_id)] == [
        "submitted",
        "canceled",
    ]


async def test_owner_scoping(store: PostgresTaskStore) -> None:
    row = (await store.create_task(new_task(owner="alice"))).row
    assert await store.get_task(row.task_id, "bob") is None
    assert await store.get_task(row.task_id, "alice") is not None
    with pytest.raises(NotFound):
        await store.cancel_task(row.task_id, "bob", "x")


async def test_list_pages_filters_and_counts(store: PostgresTaskStore) -> None:
    ids = [
        (await store.create_task(new_task(owner="o", context_id="c1"))).row.task_id
        for _ in range(5)
    ]
    await store.create_task(new_task(owner="o", context_id="c2"))
    await store.create_task(new_task(owner="other", context_id="c1"))
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_tasks(
            "o", context_id="c1", state=None, after=None, page_size=2, cursor=cursor
        )
        assert page.total == 5
        seen += [t.task_id for t in page.tasks]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    working = await store.list_tasks(
        "o", context_id=None, state="working", after=None, page_size=10, cursor=None
    )
    assert working.total == 0 and working.tasks == []
    with pytest.raises(StoreError, match="page token"):
        await store.list_tasks(
            "o", context_id=None, state=None, after=None, page_size=2, cursor="garbage"
        )
