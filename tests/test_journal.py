"""The step journal (`engine/journal.py`, `persistence/steps.py`) on a real database: a
segment's workflow run again gets its steps' results back in order, as they were written, a
failed step's failure again, and runs on live from the first step not kept; a step waits
out a database outage; an execution that lost its workflow, or whose workflow was cancelled
in DBOS, is stopped with DBOS's own errors; a path that differs from the one recorded is
refused. The process tier: a run begun with DBOS's step records (before the journal)
replays from them when a worker on this code takes it up."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import textwrap
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState
from dbos import error as dbos_error

from a2a_agent.engine.journal import OutageRetry, StepFailed, StepJournal
from a2a_agent.engine.runner import READS_ITS_VIEW_FIRST
from a2a_agent.harness.checks.plan_harness import PlanHarness
from a2a_agent.harness.model.model_work import ModelWork
from persistence.db import Pool
from persistence.errors import StoreError, StoreUnavailable
from persistence.runs import PostgresRunStore
from persistence.steps import (
    KeptStep,
    NotOwner,
    PostgresStepResults,
    SegmentRef,
    StepClash,
    WorkflowCancelled,
    keep_waiting,
)
from tests.persistence.rows import made, rows
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_line
from tests.support.workflows import as_dbos_steps, workflow_status
from tests.test_restart import assert_transitions_sound

JSON = dict[str, Any]
NO_WAIT = OutageRetry(attempts=3, interval_s=0.0)


async def a_workflow(pool: Pool, *, owner: str = "owner-1", status: str = "PENDING") -> SegmentRef:
    """A task and its segment 0's workflow row, as DBOS makes it, run by `owner`."""
    task_id = await made(pool)
    async with pool.connection() as conn:
        await conn.execute(
            "INSERT INTO dbos.workflow_status (workflow_uuid, status, owner_xid) "
            "VALUES (%s, %s, %s)",
            (task_id, status, owner),
        )
    return SegmentRef(task_id, 0, task_id, owner)


async def hand_to(pool: Pool, ref: SegmentRef, owner: str) -> None:
    """A takeover: DBOS gives the workflow a new owner token."""
    async with pool.connection() as conn:
        await conn.execute(
            "UPDATE dbos.workflow_status SET owner_xid = %s WHERE workflow_uuid = %s",
            (owner, ref.workflow_id),
        )


class Steps:
    """Steps that count their runs and return what they are told."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()

    def returning(self, name: str, value: JSON) -> Callable[[], Awaitable[JSON]]:
        async def step() -> JSON:
            self.ran[name] += 1
            return value

        return step

    def raising(self, name: str, *errors: Exception) -> Callable[[], Awaitable[JSON]]:
        queue = list(errors)

        async def step() -> JSON:
            self.ran[name] += 1
            if queue:
                raise queue.pop(0)
            return {"outcome": "ok"}

        return step


# ---- the store ---------------------------------------------------------------------------


async def test_a_kept_result_comes_back_as_written_key_order_and_all(pool: Pool) -> None:
    store = PostgresStepResults(pool)
    ref = await a_workflow(pool)
    result = {"outcome": "ok", "payload": {"z": 1, "a": [1.5, "\u0000", {"y": None, "b": 2}]}}
    await store.keep(ref, KeptStep(1, "snapshot", result=result))
    await store.keep(ref, KeptStep(2, "run_item", failure="ValueError: no"))
    kept = await store.kept(ref.task_id, 0)
    assert kept == {
        1: KeptStep(1, "snapshot", result=result),
        2: KeptStep(2, "run_item", failure="ValueError: no"),
    }
    assert kept[1].result is not None and list(kept[1].result["payload"]) == ["z", "a"]
    assert await store.kept(ref.task_id, 1) == {}  # another segment's are its own


async def test_only_the_workflows_owner_keeps_a_step_and_a_position_is_kept_once(
    pool: Pool,
) -> None:
    store = PostgresStepResults(pool)
    ref = await a_workflow(pool)
    await store.keep(ref, KeptStep(1, "snapshot", result={"outcome": "ok"}))
    with pytest.raises(StepClash, match=r"step 1 .* kept already"):
        await store.keep(ref, KeptStep(1, "begin_task", result={"outcome": "ok"}))
    await hand_to(pool, ref, "owner-2")
    with pytest.raises(NotOwner):
        await store.keep(ref, KeptStep(2, "begin_task", result={"outcome": "ok"}))
    cancelled = await a_workflow(pool, status="CANCELLED")
    with pytest.raises(WorkflowCancelled):
        await store.keep(cancelled, KeptStep(1, "snapshot", result={"outcome": "ok"}))
    kept = await rows(pool, "SELECT task_id, step_no, name FROM step_results ORDER BY task_id")
    assert kept == [{"task_id": ref.task_id, "step_no": 1, "name": "snapshot"}]


async def test_a_tasks_step_results_go_with_it(pool: Pool) -> None:
    store = PostgresStepResults(pool)
    ref = await a_workflow(pool)
    await store.keep(ref, KeptStep(1, "snapshot", result={"outcome": "ok"}))
    async with pool.connection() as conn:
        await conn.execute("DELETE FROM tasks WHERE id = %s", (ref.task_id,))
    assert await store.kept(ref.task_id, 0) == {}


# ---- the journal ---------------------------------------------------------------------------


async def test_a_segment_run_again_gets_its_steps_back_and_runs_on_from_the_first_not_kept(
    pool: Pool,
) -> None:
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT)
    ref = await a_workflow(pool)
    steps = Steps()
    assert not journal.active()
    async with journal.segment(ref):
        assert journal.active()
        assert await journal.step("a", steps.returning("a", {"n": 1})) == {"n": 1}
        assert await journal.step("b", steps.returning("b", {"n": 2})) == {"n": 2}
    assert not journal.active()
    # The same workflow again, as after a crash: the two steps it took are handed back (a
    # step would now return something else) and the third runs.
    async with journal.segment(ref):
        assert await journal.step("a", steps.returning("a", {"n": 10})) == {"n": 1}
        assert await journal.step("b", steps.returning("b", {"n": 20})) == {"n": 2}
        assert await journal.step("c", steps.returning("c", {"n": 3})) == {"n": 3}
    assert steps.ran == {"a": 1, "b": 1, "c": 1}
    names = await rows(pool, "SELECT step_no, name FROM step_results ORDER BY step_no")
    assert [(r["step_no"], r["name"]) for r in names] == [(1, "a"), (2, "b"), (3, "c")]


async def test_a_failed_step_fails_again_in_the_same_words_without_running(pool: Pool) -> None:
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT)
    ref = await a_workflow(pool)
    steps = Steps()
    async with journal.segment(ref):
        with pytest.raises(ValueError, match="the plan is bad"):
            await journal.step("a", steps.raising("a", ValueError("the plan is bad")))
    async with journal.segment(ref):
        with pytest.raises(StepFailed) as failed:
            await journal.step("a", steps.raising("a"))
    assert str(failed.value) == "ValueError: the plan is bad"
    assert steps.ran == {"a": 1}


async def test_a_step_waits_out_a_database_outage_and_is_kept_once(pool: Pool) -> None:
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT)
    ref = await a_workflow(pool)
    steps = Steps()
    away = StoreUnavailable("the database is unavailable")
    async with journal.segment(ref):
        assert await journal.step("a", steps.raising("a", away, away)) == {"outcome": "ok"}
        # Out of attempts: the outage is the step's failure, and it is kept as one.
        with pytest.raises(StoreUnavailable):
            await journal.step("b", steps.raising("b", away, away, away))
    assert steps.ran == {"a": 3, "b": 3}
    kept = await PostgresStepResults(pool).kept(ref.task_id, 0)
    assert kept[1].result == {"outcome": "ok"}
    assert kept[2].failure == "StoreUnavailable: the database is unavailable"


async def test_an_execution_that_lost_its_workflow_stops_at_its_next_step(pool: Pool) -> None:
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT)
    ref = await a_workflow(pool)
    steps = Steps()
    async with journal.segment(ref):
        await journal.step("a", steps.returning("a", {}))
        await hand_to(pool, ref, "owner-2")  # taken over while this one was frozen
        # a's result, waiting for its keep, is refused before b starts: b never runs.
        with pytest.raises(dbos_error.DBOSWorkflowConflictIDError):
            await journal.step("b", steps.returning("b", {}))
    assert steps.ran == {"a": 1}
    cancelled = await a_workflow(pool)
    with pytest.raises(dbos_error.DBOSWorkflowCancelledError):
        async with journal.segment(cancelled):
            async with pool.connection() as conn:
                await conn.execute(
                    "UPDATE dbos.workflow_status SET status = 'CANCELLED' WHERE workflow_uuid = %s",
                    (cancelled.workflow_id,),
                )
            await journal.step("a", steps.returning("a", {}))  # refused when it is kept
    # Neither kept: the new owner runs a again, and a finds its own records.
    assert await rows(pool, "SELECT task_id, name FROM step_results") == []


class CountedResults(PostgresStepResults):
    """The store, counting the keeps made in statements of their own."""

    def __init__(self, pool: Pool) -> None:
        super().__init__(pool)
        self.apart: list[str] = []

    async def keep(self, ref: SegmentRef, step: KeptStep) -> None:
        self.apart.append(step.name)
        await super().keep(ref, step)


def viewing(
    steps: Steps, runs: PostgresRunStore, ref: SegmentRef, name: str
) -> Callable[[], Awaitable[JSON]]:
    """A step that reads its view first, as the harness's steps named in view_first do."""

    async def step() -> JSON:
        view = await runs.view(ref.task_id)
        steps.ran[name] += 1
        return {"state": view.state}

    return step


async def test_a_step_that_reads_its_view_first_keeps_the_one_before_in_that_read(
    pool: Pool,
) -> None:
    results = CountedResults(pool)
    runs = PostgresRunStore(pool)
    journal = StepJournal(results, NO_WAIT, view_first=frozenset({"b", "c"}))
    ref = await a_workflow(pool)
    steps = Steps()
    async with journal.segment(ref):
        await journal.step("a", steps.returning("a", {"n": 1}))
        assert await rows(pool, "SELECT name FROM step_results") == []  # waiting
        await journal.step("b", viewing(steps, runs, ref, "b"))
        # b's view read kept a: no statement of its own.
        assert await rows(pool, "SELECT name FROM step_results") == [{"name": "a"}]
        await journal.step("c", viewing(steps, runs, ref, "c"))
        await journal.step("d", steps.returning("d", {}))  # not in view_first: c kept first
        assert results.apart == ["c"]
    assert results.apart == ["c", "d"]  # the segment's end keeps its last step
    kept = await results.kept(ref.task_id, 0)
    assert [(k.step_no, k.name) for k in kept.values()] == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    assert kept[1].result == {"n": 1} and kept[2].result == {"state": "submitted"}
    # Run again after a crash: every step is handed back, none runs.
    async with journal.segment(ref):
        for name in "abcd":
            await journal.step(name, steps.returning(name, {"again": True}))
    assert steps.ran == {"a": 1, "b": 1, "c": 1, "d": 1}


async def test_a_view_read_learns_of_a_takeover_before_the_step_does_anything(pool: Pool) -> None:
    runs = PostgresRunStore(pool)
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT, view_first=frozenset({"b"}))
    ref = await a_workflow(pool)
    steps = Steps()
    with pytest.raises(dbos_error.DBOSWorkflowConflictIDError):
        async with journal.segment(ref):
            await journal.step("a", steps.returning("a", {}))
            await hand_to(pool, ref, "owner-2")
            await journal.step("b", viewing(steps, runs, ref, "b"))
    assert steps.ran == {"a": 1}  # b's view read raised: nothing after it ran
    assert await rows(pool, "SELECT name FROM step_results") == []


async def test_a_refused_keep_stays_refused_if_a_step_swallows_its_views_error(
    pool: Pool,
) -> None:
    """A step that caught its view's refusal and went on meets it again at its effect
    (`Effects.run` keeps what waits first): the refused keep waits again."""
    runs = PostgresRunStore(pool)
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT, view_first=frozenset({"b"}))
    ref = await a_workflow(pool)
    steps = Steps()

    async def careless() -> JSON:
        with contextlib.suppress(StoreError):
            await runs.view(ref.task_id)
        await keep_waiting()  # as an effect starts
        steps.ran["b"] += 1
        return {}

    with pytest.raises(dbos_error.DBOSWorkflowConflictIDError):
        async with journal.segment(ref):
            await journal.step("a", steps.returning("a", {}))
            await hand_to(pool, ref, "owner-2")
            await journal.step("b", careless)
    assert steps.ran == {"a": 1}


def test_the_steps_said_to_read_their_view_first_do() -> None:
    """READS_ITS_VIEW_FIRST lets a step's view read keep the step before it; a step that
    awaited anything else first (a write, an effect) would do it before the execution
    learned whether it still owns its workflow. Each such step's harness method: its first
    await is `self.ctx.view(...)`."""
    methods: dict[str, Callable[..., Any]] = {
        "begin_attempt": PlanHarness.begin_attempt,
        "run_item": PlanHarness.run_item,
        "verify_item": PlanHarness.verify_item,
        "call_model": ModelWork.call_model,
        "call_tool": ModelWork.call_tool,
        "end_turn": ModelWork.end_turn,
    }
    assert set(methods) == READS_ITS_VIEW_FIRST
    for name, method in methods.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(method)))
        awaited = [node for node in ast.walk(tree) if isinstance(node, ast.Await)]
        first = min(awaited, key=lambda node: (node.lineno, node.col_offset))
        assert ast.unparse(first.value).startswith("self.ctx.view("), (name, ast.unparse(first))


async def test_a_body_that_takes_another_path_than_its_record_is_refused(pool: Pool) -> None:
    journal = StepJournal(PostgresStepResults(pool), NO_WAIT)
    ref = await a_workflow(pool)
    steps = Steps()
    async with journal.segment(ref):
        await journal.step("a", steps.returning("a", {}))
    async with journal.segment(ref):
        with pytest.raises(StepFailed, match="step 1 was a and is now b"):
            await journal.step("b", steps.returning("b", {}))
    assert steps.ran == {"a": 1}
    with pytest.raises(RuntimeError, match="outside a segment"):
        await journal.step("a", steps.returning("a", {}))


# ---- a run begun before the journal ----------------------------------------------------------


@pytest.mark.processes
@pytest.mark.slow
async def test_a_run_begun_with_dbos_step_records_replays_from_them(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    gate, ledger = home.parent / "go", home.parent / "run.log"
    second = (
        f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; '
        f"while [ ! -f {gate} ]; do sleep 0.1; done; echo b > b.txt"
    )
    plan = [
        item("a", f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; echo a > a.txt', "test -f a.txt"),
        item("b", second, "test -f b.txt"),
    ]
    server = start_agent("serve", "journal-old")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(plan))
    wait_for_line(ledger, f"{task.id}:b:1:run")
    server.kill()
    # As the code before the journal left it: one marker for the five patches, then each
    # step as DBOS's record of it, by position.
    with psycopg.connect(database_url) as conn:
        as_dbos_steps(conn, task.id, ["all-five"])
    gate.touch()
    server = start_agent("serve", "journal-old")
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status.message
    # The task completes in `finish`; the segment's last step (`settle_delegations`) is
    # recorded after it: its record is read once DBOS says the workflow returned.
    for _ in range(300):
        if await workflow_status(database_url, task.id) == "SUCCESS":
            break
        await asyncio.sleep(0.05)
    # Item a's steps came back from DBOS's records; b's run, killed while it ran, ran again.
    assert Counter(ledger.read_text().split()) == {f"{task.id}:a:1:run": 1, f"{task.id}:b:1:run": 2}
    with psycopg.connect(database_url) as conn:
        names = [n for (n,) in conn.execute(
            "SELECT function_name FROM dbos.operation_outputs WHERE workflow_uuid = %s "
            "ORDER BY function_id", (task.id,))]  # fmt: skip
        journaled = conn.execute(
            "SELECT count(*) FROM step_results WHERE task_id = %s", (task.id,)
        ).fetchone()
    assert names[0] == "DBOS.patch-all-five" and names[-1] == "PlanRunner.settle_delegations"
    assert "PlanRunner.finish" in names and journaled == (0,)
    assert_transitions_sound(database_url, task.id)
