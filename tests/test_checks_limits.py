"""Checks that can fail, at their limits (issue 13, parts 2 and 5): the policy reopens an item
at most twice, pre-checks and re-verification are charged to the budget as commands and
honour it and their timeouts, and independent checks run side by side no more than
A2A_AGENT_REVERIFY_PARALLELISM at once."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, report_of, send, wait_for
from tests.support.db import rows
from tests.support.processes import StartAgent
from tests.test_budget import budget_message
from tests.test_pauses import plan_with
from tests.test_regressions import (
    assert_counts_agree,
    breaking_plan,
    items_of,
    reverified,
)
from tests.test_restart import assert_transitions_sound

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED


def steps_charged(database_url: str, task_id: str) -> Counter[str]:
    """The budget's ledger by the step each charge was for (the key's last part, without
    the commit a check ran at); every one of them a command."""
    found = rows(database_url, "SELECT key, kind FROM budget_charges WHERE task_id = %s", task_id)
    assert {kind for _, kind in found} == {"command"}
    return Counter(key.rsplit(":", 1)[1].split(".")[0] for key, _ in found)


async def test_an_item_that_regresses_again_after_two_reopenings_fails_the_run(
    start_agent: StartAgent, database_url: str
) -> None:
    # Two items that undo each other: each reopening of one breaks the other, for ever.
    plan = [
        item("a", "echo a > a.txt; rm -f b.txt", "test -f a.txt"),
        item("b", "rm -f a.txt; echo b > b.txt", "test -f b.txt"),
    ]
    both = "test -f a.txt && test -f b.txt"  # never true at the end of a round
    server = start_agent("serve", "lim-1")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"onRegression": "reopen"}, verify=both))
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "a regressed again after 2 reopenings" in text and "broken by item `b`" in text
    items = items_of(done)
    assert items["a"]["status"] == "regressed" and items["a"]["attempts"] == 3
    assert items["b"]["status"] == "done" and items["b"]["attempts"] == 3
    assert sum(1 for e in items["a"]["history"] if "reopened" in e) == 2
    # Five rounds: a broken by b, b by a, a by b, b by a, and a a third time: the end.
    rounds = rows(
        database_url,
        "SELECT key FROM effects WHERE task_id = %s AND step = 'reverify_round' ORDER BY key",
        done.id,
    )
    assert [k.rsplit(".", 1)[1] for (k,) in rounds] == ["1", "2", "3", "4", "5"]
    blamed = [
        (name, r["brokenBy"]["item"])
        for name in "ab"
        for r in reverified(items[name])
        if r["result"] == "regressed"
    ]
    assert Counter(blamed) == {("a", "b"): 3, ("b", "a"): 2}
    # It never completed, so the plan's own check never ran.
    acceptance = rows(
        database_url, "SELECT key FROM effects WHERE task_id = %s AND step = 'acceptance'", done.id
    )
    assert acceptance == []
    counts = assert_counts_agree(database_url, done)
    assert (counts["regressed"], counts["reopened"]) == (2, 2)
    assert_transitions_sound(database_url, done.id)


async def test_pre_checks_re_verification_and_probes_are_charged_as_commands(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "lim-2")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(breaking_plan(), {"onRegression": "fail"}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    # Per item a pre-check, its run and its verify; a round of four checks; four probes
    # (a's own commit, d at HEAD, b, c) to name d. Nothing else was charged, nothing twice.
    assert steps_charged(database_url, done.id) == {
        "precheck": 4,
        "run": 4,
        "verify": 4,
        "reverify": 4,
        "probe": 4,
    }
    budget = MessageToDict(done.metadata)["budget"]
    # After d was done: the four checks run again and the four probes, none of it progress.
    assert budget["stepsWithoutProgress"]["used"] == 8
    # Commands are not model tool calls: the actions dimension counts none of them.
    assert budget["actions"]["used"] == 0 and budget["actionsByTool"] == {}
    assert report_of(done)["budget"]["stepsWithoutProgress"]["used"] == 8


async def test_re_verification_and_pre_checks_stop_at_the_budget(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "lim-3")
    # Without pre-checks an item costs two steps after the one before was done (run, verify:
    # the verify that marks it done is progress): a limit of 2 lets all three be worked. The
    # round's checks are charged too: c's would be the third step, and is refused.
    unchecked = [item(n, f"echo {n} > {n}.txt", f"test -f {n}.txt", precheck=False) for n in "abc"]
    # With pre-checks, a's pre-check and run use the two steps (nothing is done yet) and its
    # verify is refused.
    checked = [item(n, f"echo {n} > {n}.txt", f"test -f {n}.txt") for n in "abc"]
    limit = {"max_steps_without_progress": 2}
    async with a2a_client(server.url) as client:
        first = await send(client, budget_message(unchecked, limit))
        stopped_in_round = await wait_for(client, first.id, timeout=60)
        second = await send(client, budget_message(checked, limit))
        stopped_in_walk = await wait_for(client, second.id, timeout=60)
    for stopped in (stopped_in_round, stopped_in_walk):
        assert stopped.status.state == FAILED
        failure = MessageToDict(stopped.metadata)["failure"]
        assert failure["reason"] == "budget_exhausted"
        assert (failure["dimension"], failure["used"]) == ("stepsWithoutProgress", 2)
    assert {i["status"] for i in items_of(stopped_in_round).values()} == {"done"}
    assert steps_charged(database_url, stopped_in_round.id) == {
        "run": 3,
        "verify": 3,
        "reverify": 2,
    }
    ran = rows(
        database_url,
        "SELECT item_id FROM effects WHERE task_id = %s AND step = 'reverify'",
        stopped_in_round.id,
    )
    assert sorted(i for (i,) in ran) == ["a", "b"]
    walked = [i["status"] for i in items_of(stopped_in_walk).values()]
    assert walked == ["interrupted", "pending", "pending"]  # it was being verified
    assert steps_charged(database_url, stopped_in_walk.id) == {"precheck": 1, "run": 1}


async def test_checks_that_hang_are_cut_off_at_their_timeout(
    start_agent: StartAgent, database_url: str
) -> None:
    def hangs_in(step: str, name: str) -> dict[str, Any]:
        command = f'case "$A2A_IDEMPOTENCY_KEY" in *:{step}*) sleep 120;; esac; test -f {name}'
        return {"command": command, "timeoutS": 1}

    plan = [
        item("a", "echo a > a", hangs_in("reverify.", "a")),
        item("b", "echo b > b", hangs_in("precheck", "b")),
    ]
    server = start_agent("serve", "lim-4")
    began = time.monotonic()
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"onRegression": "fail"}))
        done = await wait_for(client, task.id, timeout=60)
    assert time.monotonic() - began < 30  # two checks of 120 s each did not hold it up
    items = items_of(done)
    # The pre-check that hung did not pass, so it cannot be weak: it failed before the work.
    (pre,) = [e["precheck"] for e in items["b"]["history"] if e["attempt"] == 0]
    assert pre["result"] == "fails_before" and pre["timedOut"] is True
    assert pre["exitCode"] == 124 and 1 <= pre["durationS"] < 10
    # The re-verification that hung is a failing check: a is regressed, and the run failed.
    assert done.status.state == FAILED
    assert items["a"]["status"] == "regressed"
    (found,) = [r for r in reverified(items["a"]) if r["result"] == "regressed"]
    assert found["timedOut"] is True and found["exitCode"] == 124
    assert 1 <= found["durationS"] < 10
    assert "killed after 1 s timeout" in found["outputTail"]
    assert "timed out after 1 s" in done.status.message.parts[0].text
    # It hung only in the round: on plain exports of a's own commit and of HEAD (b's) it
    # passes, so no commit broke it and b, the last item, is not blamed.
    assert found["brokenBy"] is None and found["bisect"]["found"] is False
    probes = found["bisect"]["probes"]
    assert [p["commit"] for p in probes] == [items["a"]["commit"], items["b"]["commit"]]
    assert [p["exitCode"] for p in probes] == [0, 0]
    assert "passes on a plain export of" in found["bisect"]["why"]
    assert {r["result"] for r in reverified(items["b"])} == {"passed"}
    assert_counts_agree(database_url, done)


def concurrency(spans: dict[str, tuple[float, float]]) -> int:
    """The most spans open at one moment."""
    return max(sum(1 for s, e in spans.values() if s <= start < e) for start, _ in spans.values())


async def test_re_verification_runs_at_most_the_parallelism_at_once(
    start_agent: StartAgent, home: Path
) -> None:
    ledger = home.parent / "lanes.log"

    # Only the round's runs are stamped and slow: a second each, so lanes that start
    # together overlap however slowly the boxes start.
    def stamp(what: str) -> str:
        return f'echo "{what} $A2A_IDEMPOTENCY_KEY $(date +%s.%N)" >> {ledger}'

    check = (
        f'case "$A2A_IDEMPOTENCY_KEY" in *:reverify.*) {stamp("start")}; sleep 1; '
        f"{stamp('end')};; esac; test -f {{name}}"
    )
    independent = [
        item(n, f"echo {n} > {n}", {"command": check.format(name=n), "independent": True})
        for n in ("p", "q", "r", "s", "t")
    ]
    alone = [item(n, f"echo {n} > {n}", check.format(name=n)) for n in ("x", "y")]
    server = start_agent("serve", "lim-5", A2A_AGENT_REVERIFY_PARALLELISM="2")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with([*independent[:3], *alone, *independent[3:]]))
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == COMPLETED
    stamps: dict[str, dict[str, float]] = {}
    for what, key, at in (line.split() for line in ledger.read_text().splitlines()):
        stamps.setdefault(key.split(":")[1], {})[what] = float(at)
    spans = {name: (s["start"], s["end"]) for name, s in stamps.items()}
    assert sorted(spans) == ["p", "q", "r", "s", "t", "x", "y"]  # each ran once
    side = {n: spans[n] for n in "pqrst"}
    # Five independent checks in two lanes: two at once, never three.
    assert concurrency(side) == 2
    assert concurrency(spans) == 2
    # The checks not declared independent ran alone: nothing else ran while they did.
    for name in "xy":
        start, end = spans[name]
        others = [n for n, (s, e) in spans.items() if n != name and s < end and start < e]
        assert others == [], f"{name} overlapped {others}"
