"""Claude works the items: planning, tool use, and checks the model cannot game.

The model is a fake Anthropic server on loopback (tests/support/fake_anthropic.py), reached
by the real anthropic client inside a real a2a-agent process through ANTHROPIC_BASE_URL.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, TaskState

from a2a_agent.harness.model import prompts
from tests.support.a2a import a2a_client, plan_message, plan_of, report_of, send, wait_for
from tests.support.fake_anthropic import (
    FakeAnthropic,
    error_reply,
    model_env,
    text_reply,
    tool_reply,
)
from tests.support.processes import AgentProcess, StartAgent
from tests.support.waiting import wait_for_line, wait_for_row

COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED


def text_message(text: str) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


def git_log(workspace: Path) -> list[str]:
    return subprocess.run(
        ["git", "log", "--format=%H"], cwd=workspace, check=True, capture_output=True, text=True
    ).stdout.split()


def texts_of(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"])


async def test_text_goal_is_planned_and_worked_with_tools(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, home: Path
) -> None:
    fake.add(
        error_reply(429, retry_after=0.001),  # the SDK retries this itself
        tool_reply(
            "submit_plan",
            {
                "goal": "greet",
                "items": [
                    {
                        "id": "hello",
                        "title": "Write hello.txt",
                        "verify": "grep -q hello hello.txt",
                    },
                    {
                        "id": "world",
                        "title": "Write world.txt",
                        "verify": "test -f world.txt",
                        "max_attempts": 2,
                    },
                ],
            },
        ),
        tool_reply("write_file", {"path": "hello.txt", "content": "hello\n"}),
        text_reply("Wrote hello.txt with the greeting."),
        error_reply(529, retry_after=0.001),
        tool_reply("bash", {"command": "echo world > world.txt"}),
        text_reply("Created world.txt."),
    )
    server = start_agent("serve", "model-1", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("Write hello.txt and world.txt"))
        assert task.status.state == TaskState.TASK_STATE_SUBMITTED
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    plan = plan_of(done)
    assert [i["id"] for i in plan["items"]] == ["hello", "world"]
    assert all(i["status"] == "done" and i["commit"] for i in plan["items"])
    report = report_of(done)
    assert report["itemsDone"] == ["hello", "world"]
    assert report["filesChanged"] == ["hello.txt", "world.txt"]
    workspace = home / "workspaces" / task.id
    assert (workspace / "hello.txt").read_text() == "hello\n"
    # The start commit, one per verified item, and the run's end (its final files).
    assert len(git_log(workspace)) == 4
    assert fake.request_count == 7 and fake.remaining == 0

    requests = fake.requests
    planning = requests[1]
    assert planning["tool_choice"] == {"type": "tool", "name": "submit_plan"}
    assert planning["system"][0]["cache_control"] == {"type": "ephemeral"}
    work = requests[2]
    assert {t["name"] for t in work["tools"]} == {
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "list_files",
        "record_fact",
        "ask_person",
        "propose_plan_change",
        "delegate",
    }
    assert work["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert "Write hello.txt and world.txt" in texts_of(work)
    assert "# Your item: hello" in texts_of(work)
    assert "tool_result" in texts_of(requests[3])
    with psycopg.connect(database_url) as conn:
        calls = conn.execute(
            "SELECT purpose, input_tokens > 0, output_tokens > 0 FROM model_calls "
            "WHERE task_id = %s ORDER BY at",
            (task.id,),
        ).fetchall()
    assert [c[0] for c in calls] == ["plan", "work", "work", "work", "work"]
    assert all(c[1] and c[2] for c in calls)
    progress = (workspace / "progress.md").read_text()
    assert "model: Wrote hello.txt with the greeting." in progress


async def test_claimed_success_does_not_mark_an_item_done(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    fake.add(text_reply("All done!"), text_reply("Really, it is done."), text_reply("Trust me."))
    server = start_agent("serve", "model-2", **model_env(fake))
    plan = [
        {
            "id": "needed",
            "title": "Create needed.txt",
            "verify": "echo 'needed.txt is missing'; test -f needed.txt",
            "max_attempts": 3,
        }
    ]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(plan))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    item = plan_of(done)["items"][0]
    assert item["status"] == "failed" and item["attempts"] == 3
    assert item["evidence"]["exitCode"] == 1
    requests = fake.requests
    assert len(requests) == 3
    assert "The last verification failed" not in texts_of(requests[0])
    for later in requests[1:]:
        assert "The last verification failed" in texts_of(later)
        assert "needed.txt is missing" in texts_of(later)


def wait_effect(database_url: str, key: str, status: str, timeout: float = 30) -> None:
    wait_for_row(
        database_url,
        "SELECT count(*) > 0 FROM effects WHERE key = %s AND status = %s",
        (key, status),
        what=f"{key} {status}",
        timeout=timeout,
    )


@pytest.mark.processes
@pytest.mark.slow
async def test_kill9_mid_item_reuses_model_calls_and_tool_results(
    start_agent: StartAgent, fake: FakeAnthropic, database_url: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    fake.add(
        tool_reply("bash", {"command": f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}'}),
        tool_reply(
            "bash", {"command": f'echo "$A2A_IDEMPOTENCY_KEY" >> {ledger}; sleep 3; touch done.txt'}
        ),
        text_reply("done.txt is there."),
    )
    server = start_agent("serve", "model-k", **model_env(fake))
    plan = [{"id": "work", "title": "Make done.txt", "verify": "test -f done.txt"}]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(plan))
    key = f"{task.id}:work:1:tool.1.0"
    wait_effect(database_url, key, "started")
    wait_for_line(ledger, key)  # the tool's command is running
    time.sleep(0.5)
    server.kill()
    assert fake.request_count == 2
    server = start_agent("serve", "model-k", **model_env(fake))
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED
    assert fake.request_count == 3  # no model call was sent twice
    counts = Counter(ledger.read_text().split())
    assert counts[f"{task.id}:work:1:tool.0.0"] == 1  # a finished tool call never re-ran
    assert counts[key] == 2  # the interrupted one re-ran under the same key


async def test_invalid_plans_go_back_to_the_model(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    good_item = {"id": "a", "title": "A", "run": "echo a > a.txt", "verify": "test -f a.txt"}
    fake.add(
        tool_reply("submit_plan", {"goal": "g", "items": [{"id": "a", "title": "A"}]}),
        tool_reply("submit_plan", {"goal": "g", "items": [good_item, good_item]}),
        tool_reply("submit_plan", {"goal": "g", "items": [good_item]}),
    )
    server = start_agent("serve", "model-p", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("make a.txt"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED
    _, second, third = fake.requests
    assert "no verify command" in texts_of(second)
    assert "appears twice" in texts_of(third)
    assert '"is_error": true' in texts_of(third)


async def test_a_model_that_never_plans_validly_fails_the_task(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    bad = tool_reply("submit_plan", {"goal": "g", "items": []})
    fake.add(bad, bad, bad)
    server = start_agent("serve", "model-f", **model_env(fake))
    async with a2a_client(server.url) as client:
        task = await send(client, text_message("do something"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "valid plan in 3 tries" in text and "non-empty list" in text
    assert fake.request_count == 3


async def test_long_item_is_compacted_below_the_threshold(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    threshold = 2000
    big = "python3 -c \"print('x' * 6000)\""
    fake.add(
        tool_reply("bash", {"command": big}),
        text_reply("Decided to write out.txt; touched nothing else; no open questions."),
        tool_reply("write_file", {"path": "out.txt", "content": "ok\n"}),
        text_reply("Wrote out.txt."),
    )
    server = start_agent(
        "serve",
        "model-c",
        A2A_AGENT_COMPACT_AT_TOKENS=str(threshold),
        A2A_AGENT_TOOL_OUTPUT_BYTES="8000",
        **model_env(fake),
    )
    plan = [{"id": "long", "title": "Write out.txt", "verify": "test -f out.txt"}]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(plan))
        done = await wait_for(client, task.id, timeout=60)
    requests = fake.requests
    shapes = [(r["system"][0]["text"][:20], len(json.dumps(r["messages"])) // 4) for r in requests]
    assert done.status.state == COMPLETED, shapes
    assert len(requests) == 4
    compaction = requests[1]
    assert compaction["system"][0]["text"] == prompts.COMPACT_SYSTEM
    assert "x" * 1000 in texts_of(compaction)
    after = requests[2]
    assert len(json.dumps(after["messages"])) // 4 < threshold
    assert "Decided to write out.txt" in texts_of(after)


def test_default_model_is_current_in_the_installed_sdk() -> None:
    from typing import get_args  # noqa: PLC0415

    from anthropic._data import DEPRECATED_MODELS  # noqa: PLC0415
    from anthropic.types.model_param import ModelParam  # noqa: PLC0415

    from a2a_agent.model.anthropic_adapter import DEFAULT_MODEL  # noqa: PLC0415

    known = {a for arg in get_args(ModelParam) for a in get_args(arg)}
    assert DEFAULT_MODEL in known
    assert DEFAULT_MODEL not in DEPRECATED_MODELS


def test_card_lists_its_skills(start_agent: StartAgent) -> None:
    import httpx  # noqa: PLC0415

    server: AgentProcess = start_agent("serve", "card")
    card = httpx.get(f"{server.url}/.well-known/agent-card.json").json()
    skills = {s["id"]: s for s in card["skills"]}
    assert set(skills) == {"run-plan", "work-goal", "work-on-code", "delegate"}
    for skill in skills.values():
        assert skill["examples"] and skill["inputModes"] and skill["description"]
    assert "ANTHROPIC_API_KEY" in skills["work-goal"]["description"]
