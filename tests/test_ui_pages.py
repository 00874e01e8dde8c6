"""The dashboard's pages over plain HTTP (an operator's session cookie, no JavaScript): the
list's filters and its order, and a task page's budget gauges, facts with their age, diff and
timeline, each checked against the records the run left."""

from __future__ import annotations

import os
import re
import signal
from typing import Any

import psycopg
import pytest
from a2a.types.a2a_pb2 import Message, TaskState

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.processes import StartAgent
from tests.support.waiting import wait_for_line
from tests.test_auth import make_key
from tests.test_crash import wait_effect_started
from tests.test_pauses import approval, data_message
from tests.test_restart import ledger_items
from tests.test_ui_support import Node, operator_session, page

WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
TASK_KEYS = ("read", "submit", "run", "approve")


def listed(root: Node) -> list[tuple[str, str]]:
    """(task id, state) of the list's rows, in order."""
    return [
        (r.attrs["data-task"], r.attrs["data-state"])
        for r in root.all("tr")
        if "data-task" in r.attrs
    ]


async def test_the_list_filters_by_state_and_owner_and_puts_waiting_tasks_first(
    start_agent: StartAgent,
) -> None:
    server = start_agent("serve", "ui-list", A2A_AGENT_INSECURE_OPEN="0")
    alice, bob = make_key(server, "alice", *TASK_KEYS), make_key(server, "bob", *TASK_KEYS)
    ops = make_key(server, "ops", "read", "operator")
    async with a2a_client(server.url, key=bob) as client:
        asks = plan_message([item("deploy", "true", "true", irreversible=True)], "bob asks")
        waiting = await wait_for(client, (await send(client, asks)).id, WAITING)
    async with a2a_client(server.url, key=alice) as client:
        good = plan_message([item("a", "true", "true")], "alice completes")
        completed = await wait_for(client, (await send(client, good)).id)
        bad = plan_message([item("x", "true", "false", max_attempts=1)], "alice fails")
        failed = await wait_for(client, (await send(client, bad)).id)
    assert (completed.status.state, failed.status.state) == (3, 4)  # completed, failed
    w, c, f = waiting.id, completed.id, failed.id
    with operator_session(server, ops) as http:
        # The waiting task first though it changed longest ago; then the newest change first.
        everything = page(http, "/ui")
        assert listed(everything) == [(w, "input_required"), (f, "failed"), (c, "completed")]
        owners = [o.attrs["value"] for o in everything.one("select", name="owner").all("option")]
        assert owners == ["", "alice", "bob"]
        assert listed(page(http, "/ui?state=completed")) == [(c, "completed")]
        assert listed(page(http, "/ui?state=input_required")) == [(w, "input_required")]
        assert listed(page(http, "/ui?owner=bob")) == [(w, "input_required")]
        assert listed(page(http, "/ui?owner=alice")) == [(f, "failed"), (c, "completed")]
        both = page(http, "/ui?owner=alice&state=failed")
        assert listed(both) == [(f, "failed")]
        # The form keeps what was chosen; the body the page fetches again filters the same.
        assert both.one("option", value="failed").attrs.get("selected") == ""
        assert both.one("select", name="owner").one("option", value="alice").attrs.get(
            "selected"
        ) == ""  # fmt: skip
        assert listed(page(http, "/ui/tasks-body?owner=alice&state=completed")) == [
            (c, "completed")
        ]
        assert listed(page(http, "/ui?state=canceled")) == []
        assert listed(page(http, "/ui?state=bogus")) == listed(everything)  # no such filter
        row = page(http, "/ui").one("tr", data_task=w)
        assert "bob asks" in row.text and "bob" in row.text and "0 / 1" in row.text
    # Without the cookie: the login page.
    with operator_session(server) as anonymous:
        response = anonymous.get("/ui")
        assert response.status_code == 303 and response.headers["location"] == "/ui/login"


def gauge_marks(bar: Node) -> dict[str, float]:
    return {
        next(iter(m.classes - {"mark"})): float(m.attrs["data-at"])
        for m in bar.all("div", cls="mark")
    }


def budget_of(database_url: str, task_id: str) -> dict[str, Any]:
    ((budget,),) = rows(
        database_url, "SELECT metadata -> 'budget' FROM tasks WHERE id = %s", task_id
    )
    return dict(budget)


async def test_the_task_page_shows_gauges_facts_the_timeline_and_the_diff(
    start_agent: StartAgent, database_url: str
) -> None:
    server = start_agent("serve", "ui-page", A2A_AGENT_BUDGET_PAUSE_PCT="70")
    items = [
        item(
            "probe",
            "echo probe > probe.txt",
            "test -f probe.txt",
            facts=[{"key": "version", "check": "echo 1.2.3", "maxAgeS": 3600}],
        ),
        item("deploy", "echo d > deploy.txt", "test -f deploy.txt", irreversible=True),
    ]
    budget = {"max_wall_s": 600, "max_actions": {"*": 8}, "max_steps_without_progress": 50}
    plan = {"goal": "probe and deploy", "items": items}
    message: Message = data_message({"plan": plan, "budget": budget})
    async with a2a_client(server.url) as client:
        task = await send(client, message)
        await wait_for(client, task.id, WAITING)
        with operator_session(server) as http:
            shown = page(http, f"/ui/tasks/{task.id}")
            spent = budget_of(database_url, task.id)
            # A gauge per dimension with a limit, filled as the record says, marked at 50 %
            # and at this server's pause point.
            bars = {b.attrs["data-gauge"]: b for b in shown.all("div", cls="bar")}
            assert set(bars) == {"usd", "tokens", "wall_s", "actions", "steps_without_progress"}
            for name, bar in bars.items():
                used, limit = float(spent[name]["used"]), float(spent[name]["limit"])
                assert float(bar.attrs["data-pct"]) == round(min(100.0, 100 * used / limit), 2)
                assert gauge_marks(bar) == {"half": 50.0, "pause": 70.0}
                assert "left:70%" in bar.one("div", cls="pause").attrs["style"]
                pct = float(bar.attrs["data-pct"])
                level = "high" if pct >= 70 else "mid" if pct >= 50 else "low"
                assert level in bar.one("div", cls="fill").classes
            assert float(bars["wall_s"].attrs["data-pct"]) > 0  # the run's own time so far
            # Facts with their value and age.
            fact = shown.one("tr", data_fact="version")
            assert fact.one("td", cls="value").text == "1.2.3"
            assert re.fullmatch(r"\d+ s ago", fact.one("td", cls="age").text)
            with psycopg.connect(database_url) as conn:  # checked three hours ago
                conn.execute(
                    "UPDATE tasks SET metadata = jsonb_set(metadata, '{facts,version,checked_at}',"
                    " to_jsonb(clock_timestamp() - interval '3 hours')) WHERE id = %s",
                    (task.id,),
                )
            aged = page(http, f"/ui/tasks/{task.id}").one("tr", data_fact="version")
            assert aged.one("td", cls="age").text == "3 h ago"
            # The pause on the timeline: an entry, and a band of its own in the strip.
            timeline = shown.one("ul", id="timeline")
            pauses = timeline.all("li", cls="pause")
            assert pauses and "irreversible" in pauses[-1].text
            assert shown.all("div", cls="input_required")  # the band
            assert not shown.all("pre", id="diff")  # no diff before the end
            await send(client, approval(task.id, "irreversible.deploy", "approve"))
            done = await wait_for(client, task.id)
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            ended = page(http, f"/ui/tasks/{task.id}")
        diff = ended.one("pre", id="diff").text
        assert "+++ b/probe.txt" in diff and "+++ b/deploy.txt" in diff
        ((stored,),) = rows(
            database_url,
            "SELECT convert_from(body, 'UTF8') FROM task_files "
            "WHERE task_id = %s AND kind = 'output' AND name = 'diff'",
            task.id,
        )
        assert diff == stored
        kinds = [li.classes for li in ended.one("ul", id="timeline").all("li")]
        assert {"pause"} in kinds and {"done"} in kinds
        bands = [b.classes - {"band"} for b in ended.all("div", cls="band")]
        assert {"input_required"} in bands and bands[-1] == {"completed"}
        assert ended.one("span", id="task-state").text == "completed"


@pytest.mark.processes
async def test_a_crash_re_run_is_marked_on_the_timeline(
    start_agent: StartAgent, database_url: str, tmp_path: Any
) -> None:
    ledger = tmp_path / "ledger.txt"
    server = start_agent("serve", "ui-crash")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(ledger_items(2, ledger, 1.0)))
        key = f"{task.id}:i1:1:run"
        wait_effect_started(database_url, key)
        wait_for_line(ledger, key)  # the command is running
        ((pid,),) = rows(database_url, "SELECT pid FROM workers WHERE executor_id = 'ui-crash'")
        os.kill(pid, signal.SIGKILL)  # the serving process; its nanny starts another
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    with operator_session(server) as http:
        shown = page(http, f"/ui/tasks/{task.id}")
    reruns = shown.one("ul", id="timeline").all("li", cls="rerun")
    assert len(reruns) == 1 and "i1" in reruns[0].text
    assert "re-ran after the worker was lost" in reruns[0].text
    (tick,) = shown.all("div", cls="tick")
    assert "re-ran after the worker was lost" in tick.attrs["title"]
    left = float(re.fullmatch(r"left:([\d.]+)%", tick.attrs["style"]).group(1))  # type: ignore[union-attr]
    assert 0 < left < 100
