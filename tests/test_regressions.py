"""Regressions are caught (issue 13, parts 2 and 5): after the last item, and every
`reverifyEvery` items, each done item's check runs again; one that no longer passes is
regressed, a bisect names the item that broke it, and the policy reopens it, asks or fails."""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Task, TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_line
from tests.test_pauses import approval, plan_with, request_of, send_waiting
from tests.test_restart import assert_transitions_sound

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED


def breaking_plan() -> list[dict[str, Any]]:
    """Four items; the fourth deletes the file the first one's check needs."""
    return [
        item("a", "echo a > a.txt", "test -f a.txt"),
        item("b", "echo b > b.txt", "test -f b.txt"),
        item("c", "echo c > c.txt", "test -f c.txt"),
        item("d", "rm a.txt; echo d > d.txt", "test -f d.txt"),
    ]


def items_of(task: Task) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in plan_of(task)["items"]}


def reverified(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Every re-verification result an item's history holds."""
    return [r for attempt in entry["history"] for r in attempt.get("reverify", [])]


def commit_subject(workspace: Path, sha: str) -> str:
    return subprocess.run(
        ["git", "log", "-1", "--format=%s", sha],
        cwd=workspace,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def counts_from_rows(database_url: str, task_id: str) -> dict[str, int]:
    """Every verification count, counted here from the items' status and evidence rows."""
    found = rows(database_url, "SELECT status, history FROM items WHERE task_id = %s", task_id)

    def pre(history: list[dict[str, Any]]) -> str | None:
        return next(
            (e["precheck"]["result"] for e in history if e.get("attempt") == 0 and "precheck" in e),
            None,
        )

    def regressed(history: list[dict[str, Any]]) -> bool:
        return any(r["result"] == "regressed" for e in history for r in e.get("reverify", []))

    return {
        "failedBeforePassedAfter": sum(
            1 for status, h in found if status == "done" and pre(h) == "fails_before"
        ),
        "weak": sum(1 for _, h in found if pre(h) == "weak"),
        "precheckSkipped": sum(1 for _, h in found if pre(h) == "skipped"),
        "notPrechecked": sum(1 for _, h in found if pre(h) is None),
        "regressed": sum(1 for _, h in found if regressed(h)),
        "reopened": sum(1 for _, h in found if any("reopened" in e for e in h)),
    }


def assert_counts_agree(database_url: str, task: Task) -> dict[str, Any]:
    """metadata.verification and the report's counts are the ones the evidence rows give."""
    counts = dict(MessageToDict(task.metadata)["verification"])
    assert counts == counts_from_rows(database_url, task.id)
    assert report_of(task)["verification"] == counts
    return counts


def first_parents(workspace: Path) -> list[str]:
    """The workspace's commits along the first parents, oldest first (real git)."""
    out = subprocess.run(
        ["git", "rev-list", "--first-parent", "--reverse", "HEAD"],
        cwd=workspace,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.split()


def holds(workspace: Path, sha: str, path: str) -> bool:
    found = subprocess.run(["git", "cat-file", "-e", f"{sha}:{path}"], cwd=workspace, check=False)
    return found.returncode == 0


async def test_a_later_item_that_breaks_an_earlier_check_is_caught_and_named(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent("serve", "reg-1")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(breaking_plan(), {"onRegression": "fail"}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "no longer pass" in text and "broken by item `d`" in text
    items = items_of(done)
    assert items["a"]["status"] == "regressed"
    assert [i["status"] for i in (items["b"], items["c"], items["d"])] == ["done"] * 3
    (found,) = [r for r in reverified(items["a"]) if r["result"] == "regressed"]
    assert found["exitCode"] == 1 and found["atCommit"] == items["d"]["commit"]
    # The bisect named the fourth item's commit, by probing the commits after a's own.
    assert found["brokenBy"] == {"item": "d", "commit": items["d"]["commit"]}
    # A bisect over b, c, d: a's own commit first (it must pass there) and d, HEAD (the
    # round's failure there was in the workspace; a plain export must fail too), then the
    # middle of what is left, b (passes), c (passes).
    probed = [p["commit"] for p in found["bisect"]["probes"]]
    assert probed == [items[i]["commit"] for i in "adbc"]
    assert [p["exitCode"] for p in found["bisect"]["probes"]] == [0, 1, 0, 0]
    workspace = home / "workspaces" / done.id
    assert commit_subject(workspace, found["brokenBy"]["commit"]) == "Item d: Item d"
    # The other checks still passed; every re-run is a keyed effect, run once.
    assert {r["result"] for i in "bcd" for r in reverified(items[i])} == {"passed"}
    keys = rows(
        database_url,
        "SELECT key, runs FROM effects WHERE task_id = %s AND step IN ('reverify', 'probe')",
        done.id,
    )
    assert {runs for _, runs in keys} == {1}
    assert sum(1 for k, _ in keys if k.endswith(f"reverify.{items['d']['commit'][:12]}")) == 4
    # The record says it everywhere, and the counts agree with the evidence rows.
    counts = assert_counts_agree(database_url, done)
    assert counts["regressed"] == 1 and counts["reopened"] == 0
    assert report_of(done)["itemsRegressed"] == ["a"]
    progress = (workspace / "progress.md").read_text()
    assert "`a` regressed (broken by `d`)" in progress
    assert_transitions_sound(database_url, done.id)


async def test_the_bisect_names_a_breaker_in_the_middle_of_the_history(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    plan = [
        item("a", "echo a > a.txt", "test -f a.txt"),
        item("b", "rm a.txt; echo b > b.txt", "test -f b.txt"),
        *(item(n, f"echo {n} > {n}.txt", f"test -f {n}.txt") for n in "cde"),
    ]
    server = start_agent("serve", "reg-mid")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"onRegression": "fail"}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    assert "broken by item `b`" in done.status.message.parts[0].text
    items = items_of(done)
    commits = {i: items[i]["commit"] for i in "abcde"}
    (found,) = [r for r in reverified(items["a"]) if r["result"] == "regressed"]
    assert found["atCommit"] == commits["e"]  # found at HEAD, blamed on the second commit
    assert found["brokenBy"] == {"item": "b", "commit": commits["b"]}
    # git's own history: the commits after a's are exactly b, c, d, e, and a.txt is gone
    # from b on; the bisect searched those four.
    workspace = home / "workspaces" / done.id
    history = first_parents(workspace)
    after = history[history.index(commits["a"]) + 1 :]
    assert after[: len("bcde")] == [commits[i] for i in "bcde"]
    assert [holds(workspace, commits[i], "a.txt") for i in "abcde"] == [True] + [False] * 4
    # A real bisect: a's own commit (passes) and HEAD, e (fails), then the middle of b..e
    # (c: fails), then the middle of b..b (b: fails). d is never probed.
    probes = found["bisect"]["probes"]
    assert [p["commit"] for p in probes] == [commits[i] for i in "aecb"]
    assert [p["exitCode"] for p in probes] == [0, 1, 1, 1]
    # Each probe's verdict is what git holds at that commit.
    assert all((p["exitCode"] == 0) == holds(workspace, p["commit"], "a.txt") for p in probes)
    assert commit_subject(workspace, commits["b"]) == "Item b: Item b"
    assert report_of(done)["itemsRegressed"] == ["a"]
    assert "`a` regressed (broken by `b`)" in (workspace / "progress.md").read_text()
    assert_counts_agree(database_url, done)
    assert_transitions_sound(database_url, done.id)


async def test_reopen_works_the_item_again_and_completes_when_both_checks_pass(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    server = start_agent("serve", "reg-2")
    async with a2a_client(server.url) as client:
        task = await send(
            client,
            plan_with(breaking_plan(), {"onRegression": "reopen"}, verify="test -f a.txt"),
        )
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    items = items_of(done)
    assert items["a"]["status"] == "done" and items["a"]["attempts"] == 2
    attempts = {e["attempt"]: e for e in items["a"]["history"]}
    assert "reopened" in attempts[2] and "broken by item `d`" in attempts[2]["reopened"]["why"]
    # Both checks pass on the final workspace: the last round checked the reopened item too.
    last = {i: reverified(items[i])[-1] for i in "abcd"}
    assert {r["result"] for r in last.values()} == {"passed"}
    assert len({r["atCommit"] for r in last.values()}) == 1
    assert (home / "workspaces" / done.id / "a.txt").exists()
    counts = assert_counts_agree(database_url, done)
    assert (counts["regressed"], counts["reopened"]) == (1, 1)
    # The plan's own check ran after the reopening (its second key).
    acceptance = rows(
        database_url,
        "SELECT key FROM effects WHERE task_id = %s AND step = 'acceptance'",
        done.id,
    )
    assert [k for (k,) in acceptance] == [f"{done.id}:plan:2:acceptance"]
    assert_transitions_sound(database_url, done.id)


async def test_ask_waits_and_the_answer_reopens_or_skips(start_agent: StartAgent) -> None:
    server = start_agent("serve", "reg-3")
    async with a2a_client(server.url) as client:
        waiting = await send_waiting(client, plan_with(breaking_plan(), {"onRegression": "ask"}))
        asked = request_of(waiting)
        assert asked["kind"] == "regression" and asked["options"] == ["reopen", "skip", "reject"]
        (shown,) = asked["details"]["items"]
        assert shown["item"] == "a" and shown["brokenBy"]["item"] == "d"
        await send(client, approval(waiting.id, asked["id"], "reopen", note="put it back"))
        done = await wait_for(client, waiting.id, timeout=60)
        assert done.status.state == COMPLETED
        assert items_of(done)["a"]["attempts"] == 2
        again = await send_waiting(client, plan_with(breaking_plan(), {"onRegression": "ask"}))
        await send(client, approval(again.id, request_of(again)["id"], "skip"))
        skipped = await wait_for(client, again.id, timeout=60)
        rejected = await send_waiting(client, plan_with(breaking_plan(), {"onRegression": "ask"}))
        await send(client, approval(rejected.id, request_of(rejected)["id"], "reject"))
        failed = await wait_for(client, rejected.id, timeout=60)
    assert skipped.status.state == COMPLETED
    assert items_of(skipped)["a"]["status"] == "skipped"
    assert failed.status.state == FAILED and items_of(failed)["a"]["status"] == "regressed"


async def test_reverify_every_catches_it_before_the_rest_is_worked(
    start_agent: StartAgent,
) -> None:
    plan = [
        item("a", "echo a > a.txt", "test -f a.txt"),
        item("b", "rm a.txt; echo b > b.txt", "test -f b.txt"),
        item("c", "echo c > c.txt", "test -f c.txt"),
    ]
    server = start_agent("serve", "reg-4")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan, {"onRegression": "fail", "reverifyEvery": 2}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    items = items_of(done)
    assert items["a"]["status"] == "regressed" and items["c"]["status"] == "pending"
    assert reverified(items["a"])[-1]["brokenBy"]["item"] == "b"


async def test_independent_checks_are_re_verified_side_by_side(
    start_agent: StartAgent, home: Path
) -> None:
    ledger = home.parent / "side-by-side.log"
    check = (
        f'echo "start $A2A_IDEMPOTENCY_KEY" >> {ledger}; sleep 0.5; '
        f'echo "end $A2A_IDEMPOTENCY_KEY" >> {ledger}; test -f {{name}}'
    )
    plan = [
        item(n, f"echo {n} > {n}", {"command": check.format(name=n), "independent": True})
        for n in ("p", "q", "r")
    ]
    server = start_agent("serve", "reg-5", A2A_AGENT_REVERIFY_PARALLELISM="3")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED
    lines = [line.split() for line in ledger.read_text().splitlines()]
    rounds = [(what, key) for what, key in lines if ":reverify." in key]
    assert len(rounds) == 6
    # All three started before any of them ended: they ran at once.
    assert [what for what, _ in rounds[:3]] == ["start"] * 3
    # (That checks not declared independent never overlap, and that the parallelism bounds
    # the lanes: tests/test_checks_limits.py.)
    assert {r["result"] for i in items_of(done).values() for r in reverified(i)} == {"passed"}


@pytest.mark.processes
@pytest.mark.slow
async def test_kill9_during_re_verification_runs_each_check_at_most_once_more(
    start_agent: StartAgent, database_url: str, home: Path
) -> None:
    ledger = home.parent / "reverify.log"
    check = (
        f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; '
        'case "$A2A_IDEMPOTENCY_KEY" in *:reverify.*) sleep 1.5;; esac; test -f {name}'
    )
    plan = [item(n, f"echo {n} > {n}", check.format(name=n)) for n in ("a", "b", "c")]
    server = start_agent("serve", "reg-k")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_with(plan))
    in_flight = f"{task.id}:b:1:reverify."
    wait_for_line(ledger, in_flight)
    time.sleep(0.3)  # b's check is running; a's is recorded
    server.kill()
    server = start_agent("serve", "reg-k")
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED
    ran = Counter(k for k in ledger.read_text().split() if ":reverify." in k)
    assert sorted(ran.values()) == [1, 1, 2]
    assert [k for k, n in ran.items() if n == 2] == [k for k in ran if k.startswith(in_flight)]
    # The record is exact: each check's effect counts the runs the ledger saw.
    recorded = dict(
        rows(
            database_url,
            "SELECT key, runs FROM effects WHERE task_id = %s AND step = 'reverify'",
            done.id,
        )
    )
    assert recorded == dict(ran)
    items = items_of(done)
    assert {i: reverified(items[i])[-1]["runs"] for i in "abc"} == {"a": 1, "b": 2, "c": 1}
    reasons = [
        r
        for (r,) in rows(database_url, "SELECT reason FROM transitions WHERE task_id = %s", done.id)
    ]
    reran = [r for r in reasons if "re-ran after the worker was lost" in r and "reverify." in r]
    assert len(reran) == 1 and "of item `b`" in reran[0]
    assert report_of(done)["stepsRerun"] >= 1
    # One round's outcome, recorded once.
    assert sum("re-verified 3 done item(s)" in r for r in reasons) == 1
    assert_transitions_sound(database_url, done.id)
