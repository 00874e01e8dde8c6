"""Delegation (issue 17): a child run's budget. Its slice is what was asked, capped in every
dimension by what the parent has left; a child that crosses its slice in the middle of its
work stops as any run over budget does, and its parent, which counts what it spent, reads a
failed report and goes on."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest

from tests.support.a2a import a2a_client, plan_of, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent
from tests.test_delegation import (
    CHILD_PLAN,
    COMPLETED,
    FAILED,
    SURVEY,
    Routed,
    budget_of,
    conversations,
    delegations_of,
    sliced_parent,
)
from tests.test_pauses import data_message


def ledger(database_url: str, task_id: str, kinds: str, before: datetime | None = None) -> Any:
    """A task's charges of `kinds` (before a moment): money, tokens, actions, bash actions and
    charges (steps)."""
    ((usd, tokens, actions, bash, steps),) = rows(
        database_url,
        "SELECT coalesce(sum(usd), 0), coalesce(sum(tokens), 0), coalesce(sum(actions), 0),"
        " coalesce(sum(actions) FILTER (WHERE tool = 'bash'), 0), count(*)"
        f" FROM budget_charges WHERE task_id = %s AND kind {kinds}"
        " AND at < coalesce(%s, 'infinity'::timestamptz)",
        task_id,
        before,
    )
    return Decimal(usd), int(tokens), int(actions), int(bash), int(steps)


PARENT_BUDGET = {
    "maxUsd": 1.5,
    "maxTokens": 400_000,
    "maxWallS": 3600,
    "maxStepsWithoutProgress": 40,
    "maxActions": {"*": 12, "bash": 4},
}
# More than the parent has left in each dimension but two: steps without progress and
# read_file (which the parent does not limit by itself) are asked below it.
ASKED = {
    "maxUsd": 100,
    "maxTokens": 5_000_000,
    "maxWallS": 86_400,
    "maxStepsWithoutProgress": 8,
    "maxActions": {"*": 500, "bash": 100, "read_file": 7},
}


async def test_a_childs_slice_is_capped_in_every_dimension_by_what_its_parent_has_left(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str
) -> None:
    routed = Routed(
        "CHILD-ITEM",
        parent=[
            tool_reply("bash", {"command": "echo started > notes.txt"}),
            tool_reply(
                "delegate", {"goal": "count the files", "plan": CHILD_PLAN, "budget": ASKED}
            ),
            tool_reply("bash", {"command": "echo surveyed > summary.txt"}),
            text_reply("summary written"),
        ],
        child=[tool_reply("bash", {"command": "echo 3 > count.txt"}), text_reply("counted")],
    )
    fake.add(*routed.entries)
    server = start_agent("serve", "slice-1", **model_env(fake))
    plan = {"plan": {"goal": "survey", "items": [SURVEY]}, "budget": PARENT_BUDGET}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(plan))
        done = await wait_for(client, task.id, timeout=90)
        assert done.status.state == COMPLETED, done.status.message
        (found,) = delegations_of(done)
        child = await client.get_task(GetTaskRequest(id=found["child"]))
    assert child.status.state == COMPLETED, child.status.message
    ((limits, born, parent_born),) = rows(
        database_url,
        "SELECT c.budget, c.created_at, p.created_at FROM tasks c JOIN tasks p"
        " ON p.id = c.parent_id WHERE c.id = %s",
        child.id,
    )
    # What the parent had spent when it delegated: everything charged before the child was.
    usd, tokens, actions, bash, steps = ledger(database_url, done.id, "<> 'reservation'", born)
    assert usd > 0 and tokens > 0 and actions >= 1 and bash == 1
    assert limits["max_usd"] == pytest.approx(round(1.5 - float(usd), 6), abs=1e-6)
    assert limits["max_tokens"] == 400_000 - tokens
    assert limits["max_actions"]["*"] == 12 - actions
    assert limits["max_actions"]["bash"] == 4 - bash == 3
    assert limits["max_actions"]["read_file"] == 7  # asked for less than the parent has left
    assert limits["max_steps_without_progress"] == 8 < 40 - steps
    # Wall time: what the parent had left when its step looked (before the child was made).
    elapsed = (born - parent_born).total_seconds()
    assert 3600 - elapsed - 1 <= limits["max_wall_s"] <= 3600 - elapsed + 2
    # The caller's view of the child says the same.
    shown = budget_of(child)
    assert shown["usd"]["limit"] == limits["max_usd"]
    assert shown["wallS"]["limit"] == limits["max_wall_s"]
    assert shown["actions"]["limit"] == limits["max_actions"]["*"]


async def test_a_child_that_crosses_its_slice_mid_run_stops_cleanly(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, home: Path
) -> None:
    """The child works (a command that writes a file), then a model call whose usage takes
    it over its token slice: the next step does not run, its record is closed, and the
    parent reads a failed report, counts what the child spent, and goes on."""
    routed = Routed(
        "CHILD-ITEM",
        parent=sliced_parent(60_000),
        child=[
            tool_reply("bash", {"command": "echo partial > partial.txt"}),
            tool_reply("bash", {"command": "echo 3 > count.txt"}, output_tokens=80_000),
            text_reply("counted"),  # never asked for
        ],
    )
    fake.add(*routed.entries)
    server = start_agent("serve", "slice-2", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "survey", "items": [SURVEY]}}))
        done = await wait_for(client, task.id, timeout=90)
        assert done.status.state == COMPLETED, done.status.message
        (found,) = delegations_of(done)
        child = await client.get_task(GetTaskRequest(id=found["child"]))
    assert child.status.state == FAILED
    stopped = child.status.message.parts[0].text
    assert "budget_exhausted: tokens" in stopped and "60000" in stopped
    parent_calls, child_calls = conversations(fake, "CHILD-ITEM")
    assert len(child_calls) == 2  # it worked, then crossed: no model call after that
    workspace = home / "workspaces" / child.id
    assert (workspace / "partial.txt").read_text() == "partial\n"
    assert not (workspace / "count.txt").exists()  # the step after the crossing never ran
    # Its record is closed: a report, its plan (the item it was working now `interrupted`), and
    # its delegation ended with it.
    assert report_of(child)["summary"]
    assert [i["status"] for i in plan_of(child)["items"]] == ["interrupted"]
    ((state, result),) = rows(
        database_url, "SELECT state, result FROM delegations WHERE task_id = %s", done.id
    )
    assert state == "ended" and result["state"] == "failed"
    # It spent more than its slice, and every bit of it is on its parent's ledger too.
    child_usd, child_tokens, child_actions, _, _ = ledger(
        database_url, child.id, "<> 'reservation'"
    )
    assert child_tokens > 60_000 and child_actions >= 1
    assert ledger(database_url, done.id, "= 'child'")[:3] == (
        child_usd,
        child_tokens,
        child_actions,
    )
    own_usd, own_tokens, _, _, _ = ledger(database_url, done.id, "NOT IN ('reservation', 'child')")
    spent = budget_of(done)
    assert spent["tokens"]["used"] == own_tokens + child_tokens
    assert spent["usd"]["used"] == pytest.approx(float(own_usd + child_usd), abs=1e-6)
    # The parent's model read the failed report (the budget named), never the transcript.
    told = json.loads(parent_calls[1])["messages"][-1]["content"][0]
    assert told["type"] == "tool_result" and told["is_error"] is True
    assert '"failed"' in told["content"] and "budget_exhausted" in told["content"]
    assert not any("partial.txt" in c for c in parent_calls)
