"""Every command in a box: no view of the server's secrets, processes or other tasks' files,
nothing written outside its workspace, nothing left running after its step."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import psycopg
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent
from tests.support.secrets import secret

SECRET = secret("sk-ant-sandbox-test-0123456789")


def leftover(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return found.stdout.split()


async def test_a_command_sees_no_secret_and_changes_nothing_outside_its_workspace(
    start_agent: StartAgent, home: Path, tmp_path: Path, database_url: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    server = start_agent(
        "serve",
        "box-1",
        ANTHROPIC_API_KEY=SECRET,
        A2A_AGENT_ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        A2A_AGENT_SANDBOX_SHARED="",
    )
    marker = "sleep 3217"
    probe = "; ".join(
        [
            "echo ENVIRON; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | sort -u",
            "echo PS; ps -eo pid,args",
            f"echo OTHER; ls {home}/workspaces 2>&1; cat {home}/admin.key 2>&1",
            f"echo WRITE; touch {outside}/x 2>&1; touch {home}/y 2>&1; touch /etc/z 2>&1",
            "echo DB; ls /run/postgresql /var/run/postgresql 2>&1",
            f"(setsid {marker} &) ; echo started",
            "echo here > inside.txt",
        ]
    )
    async with a2a_client(server.url) as client:
        other = await send(client, plan_message([item("o", "echo mine > mine.txt", "true")]))
        await wait_for(client, other.id)
        task = await send(client, plan_message([item("p", probe, "test -f inside.txt")]))
        done = await wait_for(client, task.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT string_agg(result::text, ' ') FROM effects WHERE task_id = %s", (task.id,)
        ).fetchone()
    assert row is not None and row[0] is not None
    # What the command printed, as the record keeps it and as the caller sees it.
    output = row[0] + json.dumps(MessageToDict(done))
    assert "ENVIRON" in output and "OTHER" in output and "started" in output, output
    assert SECRET not in output and "DATABASE_URL" not in output and "postgresql://" not in output
    assert "a2a_agent" not in output  # no server process in its view
    assert other.id not in output.split("OTHER", 1)[1].split("WRITE", 1)[0]
    assert "Read-only file system" in output
    assert not (outside / "x").exists() and not (home / "y").exists()
    assert (home / "workspaces" / task.id / "inside.txt").read_text() == "here\n"
    deadline = time.monotonic() + 5
    while leftover(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftover(marker) == []  # the setsid child ended with its box


async def test_planted_git_hooks_filters_and_fifos_do_nothing_outside(
    start_agent: StartAgent, tmp_path: Path, home: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    server = start_agent("serve", "box-2", A2A_AGENT_SANDBOX_SHARED="")
    plant = "; ".join(
        [
            "mkdir -p .git/hooks",
            f"printf '#!/bin/sh\\ntouch {outside}/hooked\\n' > .git/hooks/pre-commit",
            "chmod +x .git/hooks/pre-commit",
            "cp .git/hooks/pre-commit .git/hooks/post-commit",
            f"git config filter.evil.clean 'touch {outside}/filtered; cat'",
            "echo '* filter=evil' > .gitattributes",
            "rm -f plan.json progress.md; mkfifo plan.json progress.md",  # the harness writes
            "echo work > work.txt",
        ]
    )
    async with a2a_client(server.url) as client:
        task = await send(
            client,
            plan_message([item("plant", plant, "test -f work.txt"), item("next", "true", "true")]),
        )
        done = await wait_for(client, task.id)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    assert sorted(p.name for p in outside.iterdir()) == []  # no hook, no filter ran out here
    ws = home / "workspaces" / task.id
    assert (ws / "plan.json").is_file() and (ws / "progress.md").is_file()  # replaced
