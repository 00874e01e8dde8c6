"""The model's file tools against paths meant to trick them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState

from a2a_agent.harness.model.tools import MAX_READ_BYTES, WorkspaceTools
from tests.support.a2a import a2a_client, plan_message, send
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import StartAgent


@pytest.fixture
def tools(tmp_path: Path) -> WorkspaceTools:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "ok.txt").write_text("fine\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return WorkspaceTools(root=root, env={}, output_bytes=4096, max_timeout_s=10)


async def call(tools: WorkspaceTools, name: str, **args: str) -> tuple[str, bool]:
    outcome = await tools.call(name, args)
    return outcome.content, outcome.is_error


async def test_paths_out_of_the_workspace_are_refused(
    tools: WorkspaceTools, tmp_path: Path
) -> None:
    root = tools.root
    (root / "link").symlink_to(tmp_path / "secret.txt")
    (root / "dirlink").symlink_to(tmp_path)
    os.link(tmp_path / "secret.txt", root / "hard")
    cases = {
        "../secret.txt": "climbs out",
        str(tmp_path / "secret.txt"): "is absolute",
        "link": "symbolic link",
        "dirlink/secret.txt": "is a link or not a directory",
        "hard": "hard links",
        ".git/config": ".git directory",
    }
    for path, why in cases.items():
        for name, extra in (
            ("read_file", {}),
            ("write_file", {"content": "x"}),
            ("edit_file", {"old_string": "outside", "new_string": "pwned"}),
        ):
            text, failed = await call(tools, name, path=path, **extra)
            assert failed and why in text, (name, path, text)
    assert (tmp_path / "secret.txt").read_text() == "outside\n"
    assert (await call(tools, "read_file", path="ok.txt")) == ("fine\n", False)


async def test_the_harness_files_are_not_written(tools: WorkspaceTools) -> None:
    for path in ("plan.json", "progress.md", "./plan.json"):
        text, failed = await call(tools, "write_file", path=path, content="{}")
        assert failed and "harness's own record" in text
    text, failed = await call(tools, "write_file", path="sub/plan.json", content="{}")
    assert not failed  # only the top-level ones are the harness's
    assert (tools.root / "sub" / "plan.json").read_text() == "{}"


async def test_a_fifo_is_refused_without_blocking(tools: WorkspaceTools) -> None:
    os.mkfifo(tools.root / "pipe")  # no writer: a plain open for reading would wait for one
    for name, extra in (("read_file", {}), ("write_file", {"content": "x"})):
        text, failed = await asyncio.wait_for(call(tools, name, path="pipe", **extra), 30)
        assert failed and "not a regular file" in text
    (tools.root / "dev").symlink_to("/dev/zero")
    text, failed = await call(tools, "read_file", path="dev")
    assert failed and "symbolic link" in text


async def test_a_huge_sparse_file_is_read_only_up_to_the_cap(tools: WorkspaceTools) -> None:
    with open(tools.root / "huge.bin", "wb") as f:
        f.truncate(400 * 1024 * 1024)
    text, failed = await call(tools, "read_file", path="huge.bin")
    assert not failed
    assert len(text.encode()) < MAX_READ_BYTES + 200 and "cut at" in text
    text, failed = await call(tools, "edit_file", path="huge.bin", old_string="a", new_string="b")
    assert failed and "larger than" in text


async def test_the_model_tricking_its_tools_gets_errors_and_the_server_keeps_answering(
    start_agent: StartAgent, fake: FakeAnthropic, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    fake.add(
        tool_reply("bash", {"command": "mkfifo pipe; ln -s / root"}),
        tool_reply("read_file", {"path": "pipe"}),
        tool_reply("read_file", {"path": "root/etc/passwd"}),
        tool_reply("write_file", {"path": str(outside), "content": "pwned"}),
        tool_reply("write_file", {"path": "../../outside.txt", "content": "pwned"}),
        tool_reply("write_file", {"path": "plan.json", "content": "{}"}),
        tool_reply("write_file", {"path": "done.txt", "content": "done\n"}),
        text_reply("Done."),
    )
    server = start_agent("serve", "tools-1", **model_env(fake))
    plan = [{"id": "t", "title": "Try the tools", "verify": "test -f done.txt"}]
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message(plan))
        while (got := await client.get_task(GetTaskRequest(id=task.id))).status.state in (
            TaskState.TASK_STATE_SUBMITTED,
            TaskState.TASK_STATE_WORKING,
        ):  # GetTask answers all along
            await asyncio.sleep(0.1)
    assert got.status.state == TaskState.TASK_STATE_COMPLETED, got.status
    results = [
        json.dumps(block)
        for request in fake.requests
        for message in request["messages"]
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    joined = "\n".join(results)
    for why in ("not a regular file", "is a link or not a directory", "is absolute"):
        assert why in joined, why
    assert "climbs out" in joined and "harness's own record" in joined
    assert outside.read_text() == "not yours\n"
