"""The step's core: keys that are fixed strings, one keyed effect across processes, a store
that never leaves a gap, and NUL bytes that never reach PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_agent.budget import BudgetGuard
from a2a_agent.engine.segments import segment_of, workflow_id
from a2a_agent.harness.kernel.context import HarnessConfig, StepContext
from a2a_agent.harness.kernel.keys import PLAN_SCOPE, effect_key
from a2a_agent.harness.kernel.pauses import RUNNING_SEGMENT, asked_here
from a2a_agent.harness.kernel.render import plan_document
from a2a_agent.harness.kernel.results import StepResult
from a2a_agent.harness.model.tools import WorkspaceTools
from persistence.budgets import PostgresBudgets
from persistence.db import Pool
from persistence.ledger import PostgresLedger
from persistence.records import Decision, ItemChange, NewItem, NewTask, StepRecord, Transition
from persistence.runs import PostgresRunStore
from persistence.safe import NUL_SYMBOL
from persistence.tasks import PostgresTaskStore
from tests.persistence.rows import recorded
from tests.support.a2a import a2a_client, item, plan_message, plan_of, send, wait_for
from tests.support.processes import REPO, StartAgent


def test_keys_are_fixed_strings_of_the_run_position() -> None:
    assert effect_key("T", "run", scope="i1", attempt=2) == "T:i1:2:run"
    assert effect_key("T", "tool.3.0", scope="work", attempt=1) == "T:work:1:tool.3.0"
    assert effect_key("T", "model", scope=PLAN_SCOPE, attempt=2) == "T:plan:2:model"
    assert effect_key("T", "begin") == "T:task:begin"


def test_a_child_process_computes_the_same_key() -> None:
    code = (
        "from a2a_agent.harness.kernel.keys import effect_key; "
        "print(effect_key('T', 'verify', scope='i7', attempt=3))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == effect_key("T", "verify", scope="i7", attempt=3)


def test_step_results_round_trip_and_refuse_unknown_outcomes() -> None:
    result = StepResult("retry", 3, {"errors": "x"})
    assert StepResult.from_json(result.as_json()) == result
    with pytest.raises(ValueError, match="not a step outcome"):
        StepResult.from_json({"outcome": "maybe", "attempt": 0, "payload": {}})


def one_item_task() -> NewTask:
    return NewTask(
        task_id=str(uuid.uuid4()),
        owner="",
        context_id="c",
        goal="g",
        first_message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        items=[NewItem("i0", "item", "true", "true", 5, 2)],
    )


def step_context(pool: Pool, tmp_path: Path) -> StepContext:
    """The harness's step context on the test's pool, its workspaces under `tmp_path`."""
    config = HarnessConfig(
        workspaces=tmp_path / "workspaces",
        command_env={},
        command_timeout_s=60,
        output_tail_bytes=1000,
        executor_id="here",
    )
    guard = BudgetGuard(PostgresBudgets(pool), pause_pct=80, prices={})
    return StepContext(PostgresRunStore(pool), PostgresLedger(pool), guard, config)


async def test_an_effect_cut_short_in_one_process_reruns_once_in_another(
    pool: Pool, database_url: str, tmp_path: Path
) -> None:
    task = (await PostgresTaskStore(pool).create_task(one_item_task())).row
    ledger = tmp_path / "ledger.txt"
    workspaces = tmp_path / "workspaces"
    argv = [sys.executable, "-m", "tests.support.effect_child", database_url, str(workspaces)]
    argv += [task.task_id, str(ledger)]
    died = subprocess.run([*argv, "die"], cwd=REPO, capture_output=True, text=True, check=False)
    assert died.returncode == 9, died.stderr
    finished = subprocess.run(
        [*argv, "finish"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert finished.stdout.strip() == "ok", finished.stderr
    key = effect_key(task.task_id, "run", scope="i0", attempt=1)
    assert ledger.read_text().split() == [key, key]  # the same key in both processes
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT key, status, runs FROM effects WHERE task_id = %s", (task.task_id,)
        ).fetchall()
    assert rows == [(key, "completed", 2)]
    again = subprocess.run([*argv, "finish"], cwd=REPO, capture_output=True, text=True, check=False)
    assert again.stdout.strip() == "ok", again.stderr
    assert ledger.read_text().split() == [key, key]  # recorded: it never runs again


async def test_a_commit_after_a_kill_in_the_last_one_takes_over_its_lock(
    pool: Pool, tmp_path: Path
) -> None:
    """A kill -9 during a step's commit leaves git's index.lock; the step runs again after the
    restart (the run's closing step among them) and commits all the same."""
    task = (await PostgresTaskStore(pool).create_task(one_item_task())).row
    ctx = step_context(pool, tmp_path)
    ws = ctx.workspace(task.task_id)
    await ws.ensure()
    (ws.git_dir / "index.lock").write_text("")  # as the killed `git add` left it
    view = await ctx.view(task.task_id)
    key = effect_key(task.task_id, "finish")
    made, _ = await ctx.commit(view, view.items, [], key=key, message="Run ended")
    assert made is not None and made.sha == ws.head()
    assert not (ws.git_dir / "index.lock").exists()
    assert (ws.root / "plan.json").exists()


async def test_a_second_record_from_one_view_builds_on_the_first(
    pool: Pool, tmp_path: Path
) -> None:
    """An item's row after a step is worked out from the row the step read; a step that
    records twice from one view (a fact re-check, then its effect) must build the second on
    the first, not on what the view read, or the first's evidence would be lost."""
    task = (await PostgresTaskStore(pool).create_task(one_item_task())).row
    ctx = step_context(pool, tmp_path)
    await ctx.workspace(task.task_id).ensure()
    view = await ctx.view(task.task_id)
    first = ItemChange("i0", "in_progress", 1, evidence={"exit_code": 1}, history=[{"a": 1}])
    await ctx.record(view, StepRecord(effect_key="k1", step="s", result={}, item=first))
    second = ItemChange("i0", "verifying", 1)  # leaves evidence and history as they are
    await ctx.record(view, StepRecord(effect_key="k2", step="s", result={}, item=second))
    (stored,) = (await ctx.view(task.task_id)).items
    assert (stored.status, stored.evidence, stored.history) == (
        "verifying",
        {"exit_code": 1},
        [{"a": 1}],
    )


async def test_plan_json_from_kept_rows_and_lines_is_a_fresh_render(
    pool: Pool, tmp_path: Path
) -> None:
    """Between steps the worker keeps the items it recorded and their plan.json lines (a step
    reads and writes again only what changed): the file is what a fresh read renders."""
    new = dataclasses.replace(
        one_item_task(),
        items=[NewItem(f"i{n}", f"item {n}", "true", "true", 5, 2) for n in range(3)],
    )
    task = (await PostgresTaskStore(pool).create_task(new)).row
    ctx = step_context(pool, tmp_path)
    await ctx.workspace(task.task_id).ensure()
    for n, (item_id, status) in enumerate(
        [("i0", "in_progress"), ("i0", "verifying"), ("i0", "done"), ("i1", "in_progress")]
    ):
        view = await ctx.view(task.task_id)
        change = ItemChange(item_id, status, 1, history=[{"step": n, "status": status}])
        moved = Transition(status, f"step {n}", item_id=item_id, attempt=1)
        record = StepRecord(effect_key=f"k{n}", step="s", result={}, item=change)
        await ctx.record(view, dataclasses.replace(record, transitions=[moved]))
        fresh = await PostgresRunStore(pool).view(task.task_id)
        written = (ctx.workspace(task.task_id).root / "plan.json").read_text()
        assert written == plan_document(task.task_id, "g", fresh.items)
    assert [i["status"] for i in json.loads(written)["items"]] == [
        "done",
        "in_progress",
        "pending",
    ]


async def test_steps_that_only_add_transitions_leave_no_gap(pool: Pool) -> None:
    store, runs = PostgresTaskStore(pool), PostgresRunStore(pool)
    task = (await store.create_task(one_item_task())).row
    for n, (to_state, task_state) in enumerate(
        [("in_progress", "working"), ("verifying", None), ("in_progress", None)], start=1
    ):
        record = StepRecord(
            effect_key=f"{task.task_id}:i0:{n}:step",
            step="step",
            result={},
            item=ItemChange(item_id="i0", status=to_state, attempts=n),
            task_state=task_state,
            transitions=[
                Transition(item_id="i0", attempt=n, to_state=to_state, reason=f"step {n}"),
                Transition(item_id="i0", attempt=n, to_state=to_state, reason=f"again {n}"),
            ],
        )
        outcome = await recorded(runs, task.task_id, record)
        assert [t.seq for t in outcome.transitions] == [2 * n, 2 * n + 1]
    assert [t.seq for t in await runs.transitions(task.task_id)] == list(range(1, 8))
    row = await store.get_task(task.task_id, None)
    assert row is not None
    events = [seq for seq, _ in await store.events_after(task.task_id, 0)]
    assert events == list(range(1, row.event_seq + 1))


async def test_nul_bytes_in_step_output_are_stored_visibly(pool: Pool) -> None:
    store, runs = PostgresTaskStore(pool), PostgresRunStore(pool)
    task = (await store.create_task(one_item_task())).row
    tail = "before\x00after"
    outcome = await recorded(
        runs,
        task.task_id,
        StepRecord(
            effect_key=f"{task.task_id}:i0:1:verify",
            step="verify",
            result={"command": {"output_tail": tail}},
            item=ItemChange(
                item_id="i0", status="in_progress", attempts=1, evidence={"output_tail": tail}
            ),
            transitions=[Transition(item_id="i0", attempt=1, to_state="x", reason=f"ran {tail}")],
        ),
    )
    assert outcome.changed_items[0].evidence == {"output_tail": f"before{NUL_SYMBOL}after"}
    assert outcome.transitions[0].reason == f"ran before{NUL_SYMBOL}after"


async def test_tools_refuse_nul_in_paths_and_commands(tmp_path: Path) -> None:
    tools = WorkspaceTools(root=tmp_path, env={}, output_bytes=1000, max_timeout_s=5)
    for name, args in [
        ("read_file", {"path": "a\x00b"}),
        ("write_file", {"path": "a\x00b", "content": "x"}),
        ("bash", {"command": "echo a\x00b"}),
    ]:
        outcome = await tools.call(name, args)
        assert outcome.is_error and "NUL" in outcome.content, (name, outcome)
    written = await tools.call("write_file", {"path": "bin.dat", "content": "x\x00y"})
    assert not written.is_error
    read = await tools.call("read_file", {"path": "bin.dat"})
    assert read.content == "x\x00y"  # kept for the model; made storable by the store


async def test_a_run_whose_commands_print_nul_bytes_completes(start_agent: StartAgent) -> None:
    server = start_agent("serve", "nul-out")
    items = [item("nul", "printf 'run\\0out'", "printf 'verify\\0out'; true")]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(items))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status.message
    evidence = plan_of(done)["items"][0]["evidence"]
    assert evidence["outputTail"] == f"verify{NUL_SYMBOL}out"


def test_a_segment_that_paused_leaves_the_answer_to_the_next_one() -> None:
    task = "7d0c3a52-5a1e-4c1b-9f0e-1a2b3c4d5e6f"
    assert [segment_of(workflow_id(task, n)) for n in (0, 1, 12)] == [0, 1, 12]
    assert segment_of(None) is None
    decided = Decision(id="irreversible.x", kind="irreversible_action", decision="approve",
                       note=None, how="reply", segment=2)  # fmt: skip
    assert not asked_here(decided)  # outside a workflow: nothing to compare
    for running, expected in ((2, True), (3, False)):
        token = RUNNING_SEGMENT.set(running)
        try:
            assert asked_here(decided) is expected
        finally:
            RUNNING_SEGMENT.reset(token)
