"""What a command's record says at every end: a cancel that went as planned logs nothing at
error level, and a program the sandbox does not have is recorded as not found (or not
executable), naming it, with the box's rules and the fix, in the same words everywhere."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import time
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import TaskState

from a2a_agent.harness.kernel.evidence import evidence
from a2a_agent.harness.model.tools import WorkspaceTools
from a2a_agent.harness.workspace.commands import CommandResult, noted_group, run_command
from a2a_agent.harness.workspace.sandbox import Sandbox, cannot_run
from tests.support.a2a import a2a_client, item, plan_message, plan_of, report_of, send, wait_for
from tests.support.processes import StartAgent

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


@pytest.fixture
def hidden(tmp_path: Path) -> Path:
    """Stands for the server's home: a directory every box hides."""
    path = tmp_path / "server-home"
    path.mkdir()
    return path


@pytest.fixture
def box(hidden: Path) -> Sandbox:
    # As the runtime builds it: the server's home and the server user's home hidden.
    return Sandbox(hidden=(hidden, Path.home()))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


async def run(
    command: str, workspace: Path, box: Sandbox, *, path: str = SYSTEM_PATH
) -> CommandResult:
    return await run_command(
        command,
        cwd=workspace,
        env={"PATH": path},
        timeout_s=30,
        tail_bytes=4096,
        sandbox=box,
    )


def leftover(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return found.stdout.split()


def assert_recorded(result: CommandResult, *, says: str) -> str:
    """The explanation is on the result, ends its output tail and is in its evidence."""
    why = result.cannot_run
    assert why is not None and says in why, result
    assert result.output_tail.endswith(f"[a2a-agent: {why}]")
    assert evidence(result)["cannot_run"] == why
    assert CommandResult.from_json(result.as_json()) == result
    return why


async def test_a_cancelled_command_logs_nothing_at_error(
    workspace: Path, box: Sandbox, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    marker = "sleep 3221"
    pid_file = tmp_path / "pids" / "lane-0"
    running = asyncio.create_task(
        run_command(
            f"echo started; {marker}",
            cwd=workspace,
            env={"PATH": SYSTEM_PATH},
            timeout_s=60,
            tail_bytes=4096,
            sandbox=box,
            pid_file=pid_file,
        )
    )
    deadline = time.monotonic() + 10
    while not leftover(marker):
        assert time.monotonic() < deadline and not running.done()
        await asyncio.sleep(0.05)
    assert pid_file.exists()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    # What was never retrieved is logged when it is collected: collect it now.
    gc.collect()
    await asyncio.sleep(0.05)
    gc.collect()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]
    assert "never retrieved" not in caplog.text
    assert leftover(marker) == []  # the box was killed and reaped
    assert noted_group(pid_file) is None  # nothing left for the next command to kill


async def test_a_timed_out_command_is_killed_and_logs_nothing_at_error(
    workspace: Path, box: Sandbox, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    result = await run_command(
        "echo before; sleep 3222",
        cwd=workspace,
        env={"PATH": SYSTEM_PATH},
        timeout_s=0.5,
        tail_bytes=4096,
        sandbox=box,
    )
    gc.collect()
    assert result.timed_out and result.exit_code == 124 and result.cannot_run is None
    assert result.output_tail.startswith("before\n") and "0.5 s timeout" in result.output_tail
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert leftover("sleep 3222") == []


async def test_a_program_the_box_does_not_have_is_recorded_as_not_found(
    workspace: Path, box: Sandbox, hidden: Path
) -> None:
    result = await run("definitely-not-a-program --x", workspace, box)
    assert result.exit_code == 127
    why = assert_recorded(
        result,
        says="`definitely-not-a-program` was not found in the sandbox "
        "(the shell said: command not found)",
    )
    # The box's rules in one sentence, and the fix.
    for words in (
        "shows the system read-only, the task's workspace read-write and a private /tmp",
        f"hides {hidden}, {Path.home()}",
        "other tasks' workspaces",
        "A2A_AGENT_SANDBOX_SHARED is empty",
        "no network (A2A_AGENT_COMMAND_NETWORK=on",
        "install the program system-wide",
        "put it in the workspace",
    ):
        assert words in why, why
    assert len(result.output_tail) < 1500  # a failure's status message shows the last 1500
    # The model's bash tool says the same.
    tools = WorkspaceTools(
        root=workspace, env={"PATH": SYSTEM_PATH}, output_bytes=4096, max_timeout_s=30, sandbox=box
    )
    said = await tools.call("bash", {"command": "definitely-not-a-program --x"})
    assert said.is_error and said.content.endswith(f"[a2a-agent: {why}]")


async def test_a_script_under_a_hidden_directory_is_recorded_as_hidden(
    workspace: Path, box: Sandbox, hidden: Path
) -> None:
    tool = hidden / "bin" / "check.sh"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho checked\n")
    tool.chmod(0o755)
    # It is there, and runs outside the box ...
    outside = await run(str(tool), workspace, Sandbox(enabled=False))
    assert outside.exit_code == 0 and outside.output_tail == "checked\n"
    # ... and is not in it: by its path,
    by_path = await run(f"{tool} --all", workspace, box)
    assert by_path.exit_code == 127
    assert_recorded(by_path, says=f"`{tool}` is under {hidden}, which the sandbox hides")
    assert f"`{tool}` was not found in the sandbox" in str(by_path.cannot_run)
    # by a PATH entry the box hides,
    by_name = await run("check.sh", workspace, box, path=f"{tool.parent}:{SYSTEM_PATH}")
    assert_recorded(by_name, says=f"the sandbox hides these PATH entries: {tool.parent}")
    # and under the server user's home.
    at_home = Path.home() / "a2a-agent-no-such-dir" / "verify.sh"
    in_home = await run(f"{at_home} --x", workspace, box)
    assert_recorded(in_home, says=f"`{at_home}` is under {Path.home()}, which the sandbox hides")


async def test_a_script_whose_interpreter_is_hidden(
    workspace: Path, box: Sandbox, hidden: Path
) -> None:
    python = hidden / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.symlink_to("/bin/sh")
    (workspace / "check.py").write_text(f"#!{python}\necho ran\n")
    (workspace / "check.py").chmod(0o755)
    result = await run("./check.py", workspace, box)
    assert result.exit_code == 127
    assert_recorded(
        result,
        says="`./check.py` could not start: the interpreter its first line (#!) names was not "
        "found in the sandbox",
    )


async def test_a_program_that_is_not_executable_is_recorded_so(
    workspace: Path, box: Sandbox
) -> None:
    (workspace / "check.sh").write_text("echo ran\n")
    result = await run("./check.sh", workspace, box)
    assert result.exit_code == 126
    why = assert_recorded(
        result,
        says="`./check.sh` was found in the sandbox but could not be executed "
        "(the shell said: Permission denied)",
    )
    assert "chmod +x" in why and "`bash ./check.sh`" in why


async def test_a_program_that_exits_127_itself_is_not_called_missing(
    workspace: Path, box: Sandbox
) -> None:
    # Indistinguishable by the code alone: only the shell's own words say "not found".
    for code in (127, 126):
        result = await run(f"sh -c 'exit {code}'", workspace, box)
        assert result.exit_code == code and result.cannot_run is None
        assert result.output_tail == ""
        assert "cannot_run" not in evidence(result)
    # A builtin's complaint with the same words, and another exit code, is not either.
    result = await run("cd nowhere", workspace, box)
    assert result.exit_code == 1 and result.cannot_run is None


async def test_without_the_sandbox_it_says_so(workspace: Path) -> None:
    result = await run("definitely-not-a-program", workspace, Sandbox(enabled=False))
    assert result.exit_code == 127
    why = assert_recorded(result, says="`definitely-not-a-program` was not found (the shell")
    assert "A2A_AGENT_SANDBOX=off" in why and "in the sandbox" not in why


def test_the_explanation_reads_the_shells_and_wrappers_words() -> None:
    box = Sandbox(hidden=(Path("/srv/a2a"),), shared=(Path("/var/cache/pip"),), network=True)
    assert cannot_run(box, 0, "bash: line 1: x: command not found") is None
    assert cannot_run(box, 127, "all fine") is None
    cases = {
        "sh: 1: jest: not found": "`jest` was not found",
        "timeout: failed to run command 'pytest': No such file or directory": "`pytest` was",
        "env: \u2018node\u2019: No such file or directory": "`node` was not found",
        "/bin/bash: line 3: ./t.py: /srv/a2a/venv/bin/python: bad interpreter: No such file or "
        "directory": "`./t.py` could not start: `/srv/a2a/venv/bin/python` was not found in the "
        "sandbox; `/srv/a2a/venv/bin/python` is under /srv/a2a, which the sandbox hides",
        "bash: line 1: exec: make: not found": "`make` was not found",
    }
    for said, words in cases.items():
        why = cannot_run(box, 127, f"some output\n{said}\n")
        assert why is not None and words in why, (said, why)
        assert "binds /var/cache/pip read-write (A2A_AGENT_SANDBOX_SHARED)" in why
        assert "the network on (A2A_AGENT_COMMAND_NETWORK=on)" in why


async def test_a_verify_the_box_cannot_find_fails_the_item_saying_why(
    start_agent: StartAgent, home: Path
) -> None:
    server = start_agent()
    bad = item("bad", "echo work > work.txt", "definitely-not-a-program --x", max_attempts=1)
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([bad]))
        done = await wait_for(client, task.id)
    assert done.status.state == TaskState.TASK_STATE_FAILED
    (shown,) = plan_of(done)["items"]
    assert shown["status"] == "failed"
    why = shown["evidence"]["cannotRun"]
    assert why.startswith("`definitely-not-a-program` was not found in the sandbox")
    assert f"hides {home}" in why and "A2A_AGENT_SANDBOX_SHARED" in why
    assert shown["evidence"]["exitCode"] == 127
    assert shown["evidence"]["outputTail"].endswith(f"[a2a-agent: {why}]")
    verify = next(h for h in shown["history"] if h["attempt"] == 1)["verify"]
    assert verify["cannotRun"] == why
    assert report_of(done)["cannotRun"] == {"bad": why}
    assert why in done.status.message.parts[0].text
    assert why in (home / "workspaces" / task.id / "progress.md").read_text()
