"""The CLI as an A2A client of a real server (issue 15, part 2): send, watch (its exit code
says how the task ended), approve, cancel, diff, and --json for scripts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.a2a import item
from tests.support.processes import REPO, AgentProcess, StartAgent
from tests.test_auth import make_key


def cli(
    server: AgentProcess, *args: str, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "A2A_AGENT_URL": server.url,
        "A2A_AGENT_HOME": str(server.home),  # where a local server's admin.key is
        **({"A2A_AGENT_KEY": key} if key else {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "a2a_agent", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_plan(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"goal": "cli plan", "items": items}))
    return path


def test_send_and_watch_until_completed_or_failed(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-1")
    good = write_plan(tmp_path / "good.json", [
        item("a", "sleep 1; echo a > a.txt", "test -f a.txt"),
        item("b", "echo b > b.txt", "test -f b.txt"),
    ])  # fmt: skip
    done = cli(server, "send", "--plan", str(good), "--watch")
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout and "2 of 2 items done" in done.stdout
    bad = write_plan(tmp_path / "bad.json", [item("x", "true", "false", max_attempts=1)])
    failed = cli(server, "send", "--plan", str(bad), "--watch")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "failed" in failed.stdout
    # --json: what the server answered, for scripts.
    listed = json.loads(cli(server, "tasks", "list", "--json").stdout)
    assert {t["status"]["state"] for t in listed} == {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED"}
    completed = next(t for t in listed if t["status"]["state"] == "TASK_STATE_COMPLETED")
    shown = json.loads(cli(server, "tasks", "show", completed["id"], "--json").stdout)
    assert shown["id"] == completed["id"]
    plan = next(a for a in shown["artifacts"] if a["artifactId"] == "plan")
    assert [i["status"] for i in plan["parts"][0]["data"]["plan"]["items"]] == ["done", "done"]
    diff = cli(server, "tasks", "diff", completed["id"])
    assert diff.returncode == 0 and "+++ b/a.txt" in diff.stdout and "+++ b/b.txt" in diff.stdout
    table = cli(server, "tasks", "list")
    assert completed["id"][:8] in table.stdout and "cli plan" in table.stdout


def test_approve_from_the_cli_and_watch_exits_when_waiting(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    server = start_agent("serve", "cli-2", A2A_AGENT_INSECURE_OPEN="0")
    key = make_key(server, "dev", "read", "submit", "run", "approve")
    plan = write_plan(tmp_path / "ask.json", [item("deploy", "echo d > d", "test -f d",
                                                    irreversible=True)])  # fmt: skip
    sent = cli(server, "send", "--plan", str(plan), key=key)
    assert sent.returncode == 0, sent.stderr
    task_id = sent.stdout.strip()
    waiting = cli(server, "tasks", "watch", task_id, key=key)
    assert waiting.returncode == 3, waiting.stdout  # waits for a person
    assert "input_required" in waiting.stdout
    shown = cli(server, "tasks", "show", task_id, key=key)
    assert "irreversible.deploy" in shown.stdout and "approve | skip | reject" in shown.stdout
    approved = cli(server, "tasks", "approve", task_id, "--note", "ship it", key=key)
    assert approved.returncode == 0, approved.stderr
    done = cli(server, "tasks", "watch", task_id, "--json", key=key)
    assert done.returncode == 0
    task = json.loads(done.stdout)
    plan_data = next(a for a in task["artifacts"] if a["artifactId"] == "plan")
    (decision,) = plan_data["parts"][0]["data"]["plan"]["decisions"]
    assert decision["decision"] == "approve" and decision["note"] == "ship it"
    assert decision["decidedBy"] == "dev"
    # Without a key the server says so, and the CLI passes it on.
    refused = cli(server, "tasks", "list", key="a2a_000000000000_nope")
    assert refused.returncode == 1 and "401" in refused.stderr


def test_cancel_from_the_cli(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-3")
    plan = write_plan(tmp_path / "slow.json", [item("s", "sleep 30", "true")])
    task_id = cli(server, "send", "--plan", str(plan)).stdout.strip()
    canceled = cli(server, "tasks", "cancel", task_id)
    assert canceled.returncode == 0 and "canceled" in canceled.stdout
    watched = cli(server, "tasks", "watch", task_id)
    assert watched.returncode == 2
