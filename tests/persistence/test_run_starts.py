"""Workers, not the door, enqueue the runs of tasks sent (`RunStarter`, `unstarted_tasks`):
on a real database, two starters at once enqueue each task once, oldest first; a rejected
task, or one whose run exists, is left alone; a failed enqueue is tried again; a starter is
woken by the NOTIFY of a send; and a task not enqueued yet says where it waits."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import psycopg
import pytest

from a2a_agent.engine.starter import RunStarter
from persistence.db import Pool
from persistence.notify import RUNS_CHANNEL, TaskNotifier
from persistence.starts import PostgresStartStore
from persistence.tasks import PostgresTaskStore
from tests.persistence.rows import made, new_task, rows


class Enqueuer:
    """Stands in for DBOS's enqueue: the workflow row it makes, in a transaction of its own,
    as DBOS does; every call is counted (`calls`), and every enqueue made (`made`)."""

    def __init__(self, database_url: str, *, pause_s: float = 0.0) -> None:
        self.database_url = database_url
        self.pause_s = pause_s
        self.calls: list[str] = []
        self.made: list[str] = []
        self.fail_next = False

    async def __call__(self, task_id: str) -> None:
        self.calls.append(task_id)
        if self.fail_next:
            self.fail_next = False
            raise RuntimeError("the enqueue failed")
        await asyncio.sleep(self.pause_s)  # widen the window a second starter could use
        async with await psycopg.AsyncConnection.connect(self.database_url) as conn:
            await conn.execute(
                "INSERT INTO dbos.workflow_status (workflow_uuid, status, queue_name)"
                " VALUES (%s, 'ENQUEUED', 'a2a-runs') ON CONFLICT DO NOTHING",
                (task_id,),
            )
        self.made.append(task_id)


async def test_two_starters_enqueue_every_task_once_oldest_first(
    pool: Pool, database_url: str
) -> None:
    sent = [await made(pool, 1) for _ in range(45)]
    first = Enqueuer(database_url, pause_s=0.002)
    second = Enqueuer(database_url, pause_s=0.002)
    store = PostgresStartStore(pool)
    counts = await asyncio.gather(
        RunStarter(store, first, TaskNotifier(database_url), look_every_s=60).start_waiting(),
        RunStarter(store, second, TaskNotifier(database_url), look_every_s=60).start_waiting(),
    )
    calls = Counter(first.calls + second.calls)
    assert sorted(calls) == sorted(sent) and set(calls.values()) == {1}, calls
    assert sum(counts) == len(sent)
    assert first.calls and second.calls, "one starter took every task: no race was tried"
    # Each starter takes the oldest first.
    for calls_of_one in (first.calls, second.calls):
        assert calls_of_one == [t for t in sent if t in calls_of_one]
    # Once enqueued, no starter sees them again.
    assert await store.start_unstarted(first, 100) == 0


async def test_a_rejected_task_or_one_already_run_is_left_alone(
    pool: Pool, database_url: str
) -> None:
    store = PostgresTaskStore(pool)
    rejected = await store.create_task(new_task(1, rejection="a plan it cannot run"))
    assert rejected.row.state == "rejected"
    running = await made(pool, 1)
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO dbos.workflow_status (workflow_uuid, status) VALUES (%s, 'PENDING')",
            (running,),
        )
    waiting = await made(pool, 1)
    enqueue = Enqueuer(database_url)
    assert await PostgresStartStore(pool).start_unstarted(enqueue, 10) == 1
    assert enqueue.calls == [waiting]


async def test_a_failed_enqueue_leaves_its_tasks_for_the_next_look(
    pool: Pool, database_url: str
) -> None:
    sent = [await made(pool, 1) for _ in range(3)]
    enqueue = Enqueuer(database_url)
    enqueue.fail_next = True
    with pytest.raises(RuntimeError):
        await PostgresStartStore(pool).start_unstarted(enqueue, 10)
    # The batch rolled back, locks and all: the next look starts all three.
    assert await PostgresStartStore(pool).start_unstarted(enqueue, 10) == 3
    assert enqueue.calls == [sent[0], *sent]


async def test_a_starter_is_woken_by_a_send(pool: Pool, database_url: str) -> None:
    enqueue = Enqueuer(database_url)
    wakes = TaskNotifier(database_url, channel=RUNS_CHANNEL)
    listening = await wakes.start()
    # A look only every hour: the task below is started because the send woke the starter.
    starter = asyncio.create_task(
        RunStarter(PostgresStartStore(pool), enqueue, wakes, look_every_s=3600).run_forever()
    )
    try:
        # Listening, and the look its connecting woke is done: only the send's NOTIFY can
        # wake it now.
        deadline = time.monotonic() + 10
        while not await rows(
            pool,
            "SELECT 1 FROM pg_stat_activity WHERE query = %s",
            f'LISTEN "{RUNS_CHANNEL}"',
        ):
            assert time.monotonic() < deadline, "the starter's listener never listened"
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)
        task_id = await made(pool, 1)
        deadline = time.monotonic() + 10
        while not enqueue.made:  # made, not only begun: the starter is stopped below
            assert time.monotonic() < deadline, "the send did not wake the starter"
            await asyncio.sleep(0.01)
        assert enqueue.calls == enqueue.made == [task_id]
    finally:
        starter.cancel()
        await asyncio.gather(starter, return_exceptions=True)
        await wakes.stop()
        assert listening.done()


async def test_a_task_not_enqueued_yet_waits_behind_the_queue_and_earlier_sends(
    pool: Pool, database_url: str
) -> None:
    store = PostgresTaskStore(pool)
    queued = [await made(pool, 1) for _ in range(2)]
    await PostgresStartStore(pool).start_unstarted(Enqueuer(database_url), 10)
    later = [await made(pool, 1) for _ in range(3)]
    assert [await store.queued_ahead(t) for t in queued] == [0, 1]
    assert [await store.queued_ahead(t) for t in later] == [2, 3, 4]
    # A worker took the first: it waits no more, and the rest moved up.
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        await conn.execute(
            "UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = %s",
            (queued[0],),
        )
        await conn.execute("UPDATE tasks SET state = 'working' WHERE id = %s", (queued[0],))
    assert await store.queued_ahead(queued[0]) is None
    assert [await store.queued_ahead(t) for t in [queued[1], *later]] == [0, 1, 2, 3]
    assert len(await rows(pool, "SELECT id FROM tasks WHERE state = 'submitted'")) == 4
