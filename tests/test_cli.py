"""The CLI as an A2A client of a real server (issue 15, part 2): send (a plan, a goal the
model works, a repository at a ref), watch (its exit code says how the task ended, and it
shows the task's progress entries), approve, reject, cancel, diff, --json for scripts, and
the key from the local admin.key."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from a2a_agent.cli import main
from tests.support.a2a import item
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import REPO, AgentProcess, StartAgent
from tests.test_auth import make_key
from tests.test_sources import git, make_repo


@dataclass
class Ran:
    """What a CLI command left: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


CLI_ENV = ("A2A_AGENT_URL", "A2A_AGENT_HOME", "A2A_AGENT_KEY")


def cli(
    server: AgentProcess,
    *args: str,
    key: str | None = None,
    home: Path | None = None,
    process: bool = False,
) -> Ran:
    """Run `a2a-agent <args>` against `server`: in this process (the same `main`, its output
    captured; a Python start-up per command was most of this module's CPU), or as a real
    `python -m a2a_agent` process when `process` (the entry point itself is under test)."""
    env = {
        "A2A_AGENT_URL": server.url,
        "A2A_AGENT_HOME": str(home or server.home),  # where a local server's admin.key is
        **({"A2A_AGENT_KEY": key} if key else {}),
    }
    if process:
        done = subprocess.run(
            [sys.executable, "-m", "a2a_agent", *args],
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": os.environ.get("HOME", "/root"),
                **env,
            },
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return Ran(done.returncode, done.stdout, done.stderr)
    saved = {name: os.environ.pop(name, None) for name in CLI_ENV}
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.update(env)
        # On a thread of its own: the CLI runs its own event loop, and an async test's loop
        # is running on this one.
        with redirect_stdout(out), redirect_stderr(err), ThreadPoolExecutor(1) as thread:
            code = thread.submit(_main, list(args)).result(timeout=120)
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value
    return Ran(code, out.getvalue(), err.getvalue())


def cli_to_closed_pipe(server: AgentProcess, *args: str) -> Ran:
    """Run `a2a-agent <args>` as a process whose stdout is a pipe nobody reads any more (as
    in `a2a-agent tasks list | head -1`, once `head` has its line): its read end is closed
    before the command starts, so its first write fails."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "a2a_agent", *args],
            env={
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                "HOME": os.environ.get("HOME", "/root"),
                "A2A_AGENT_URL": server.url,
                "A2A_AGENT_HOME": str(server.home),
            },
            cwd=REPO,
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)
    return Ran(done.returncode, "", done.stderr)


def _main(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # as the interpreter would end on it
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1


def write_plan(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"goal": "cli plan", "items": items}))
    return path


def test_send_and_watch_until_completed_or_failed(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-1")
    good = write_plan(tmp_path / "good.json", [
        item("a", "sleep 1; echo a > a.txt", "test -f a.txt"),
        item("b", "echo b > b.txt", "test -f b.txt"),
    ])  # fmt: skip
    done = cli(server, "send", "--plan", str(good), "--watch", process=True)
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
    # Counts print as the whole numbers they are (protobuf's printer wrote `1.0`); in a process
    # of its own, where nothing of the server's was imported to teach the printer.
    printed = cli(server, "tasks", "show", completed["id"], "--json", process=True).stdout
    # (A Struct is a map: its keys come out in an order of protobuf's, which varies by process,
    # so the count may be the last key of its object, with no comma after it.)
    assert re.search(r'"attempts": 1[,\n]', printed) and '"attempts": 1.0' not in printed
    diff = cli(server, "tasks", "diff", completed["id"])
    assert diff.returncode == 0 and "+++ b/a.txt" in diff.stdout and "+++ b/b.txt" in diff.stdout
    table = cli(server, "tasks", "list")
    assert completed["id"][:8] in table.stdout and "cli plan" in table.stdout
    # The README's form, the data part {"plan": {...}}, is taken as well, with what a first
    # message may carry beside the plan (a budget, here).
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({
        "plan": {"goal": "wrapped", "items": [item("w", "true", "true")]},
        "budget": {"maxWallS": 77},
    }))  # fmt: skip
    sent = cli(server, "send", "--plan", str(wrapped), "--watch", "--json")
    assert sent.returncode == 0, sent.stdout + sent.stderr
    task = json.loads(sent.stdout)
    assert [i["id"] for i in plan_of(task)["items"]] == ["w"]
    assert task["metadata"]["budget"]["limits"]["maxWallS"] == 77


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
    # With a key it does not know the server says so, and the CLI passes its words on.
    refused = cli(server, "tasks", "list", key="a2a_000000000000_nope")
    assert refused.returncode == 1 and "this API key is not valid" in refused.stderr


def test_cancel_from_the_cli(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-3")
    plan = write_plan(tmp_path / "slow.json", [item("s", "sleep 30", "true")])
    task_id = cli(server, "send", "--plan", str(plan)).stdout.strip()
    canceled = cli(server, "tasks", "cancel", task_id)
    assert canceled.returncode == 0 and "canceled" in canceled.stdout
    watched = cli(server, "tasks", "watch", task_id)
    assert watched.returncode == 2


def test_watch_shows_the_progress_entries_of_the_event_log(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    server = start_agent("serve", "cli-4")
    plan = write_plan(tmp_path / "three.json", [
        item(name, f"echo {name} > {name}.txt", f"test -f {name}.txt") for name in "abc"
    ])  # fmt: skip
    task_id = cli(server, "send", "--plan", str(plan)).stdout.strip()
    done = cli(server, "tasks", "watch", task_id, "--json")  # quiet: waits for the end
    assert done.returncode == 0, done.stdout + done.stderr
    # Watched after the end, it still shows what happened, from the task's event log: every
    # status the task reported and every item's changes, not a status sampled once a second.
    watched = cli(server, "tasks", "watch", task_id)
    assert watched.returncode == 0, watched.stdout + watched.stderr
    lines = watched.stdout.splitlines()
    for name in "abc":
        assert any(f"working: Working on item {name}: Item {name}" in line for line in lines)
        done_line = next(line for line in lines if f"item {name}: " in line and "-> done" in line)
        assert "attempt 1, exit 0" in done_line
    order = [next(n for n, line in enumerate(lines) if f"item {name}: " in line) for name in "abc"]
    assert order == sorted(order)
    assert "submitted" in lines[0] and lines[-1].startswith(f"{task_id}: completed")
    assert sum("-> done" in line for line in lines) == 3  # each entry once


def plan_of(task: dict[str, Any]) -> dict[str, Any]:
    found = next(a for a in task["artifacts"] if a["artifactId"] == "plan")
    return dict(found["parts"][0]["data"]["plan"])


HELLO = {"id": "hello", "title": "Write hello.txt", "verify": "grep -q hello hello.txt"}


def test_send_a_goal_the_model_works(
    start_agent: StartAgent, fake: FakeAnthropic, home: Path
) -> None:
    fake.add(
        tool_reply("submit_plan", {"goal": "greet", "items": [HELLO]}),
        tool_reply("write_file", {"path": "hello.txt", "content": "hello\n"}),
        text_reply("Wrote hello.txt."),
    )
    server = start_agent("serve", "cli-5", **model_env(fake))
    done = cli(server, "send", "Write hello.txt saying hello", "--watch")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "item hello: verifying -> done" in done.stdout
    task_id = done.stdout.strip().splitlines()[-1].split(":")[0]
    shown = json.loads(cli(server, "tasks", "show", task_id, "--json").stdout)
    assert shown["history"][0]["parts"][0]["text"] == "Write hello.txt saying hello"
    assert [(i["id"], i["status"]) for i in plan_of(shown)["items"]] == [("hello", "done")]
    assert (home / "workspaces" / task_id / "hello.txt").read_text() == "hello\n"
    assert "Write hello.txt saying hello" in json.dumps(fake.requests[0]["messages"])
    assert fake.remaining == 0


def test_reject_from_the_cli(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-6", A2A_AGENT_INSECURE_OPEN="0")
    key = make_key(server, "dev", "read", "submit", "run", "approve")
    plan = write_plan(tmp_path / "ask.json", [
        item("deploy", "echo d > d", "test -f d", irreversible=True),
    ])  # fmt: skip
    task_id = cli(server, "send", "--plan", str(plan), key=key).stdout.strip()
    assert cli(server, "tasks", "watch", task_id, key=key).returncode == 3  # it asks
    nothing = cli(server, "tasks", "reject", "no-such-task", key=key)
    assert nothing.returncode == 1
    rejected = cli(server, "tasks", "reject", task_id, "--note", "not this week", key=key)
    assert rejected.returncode == 0, rejected.stderr
    assert "reject sent" in rejected.stdout
    watched = cli(server, "tasks", "watch", task_id, "--json", key=key)
    assert watched.returncode == 1  # a rejected irreversible item stops the run: it failed
    task = json.loads(watched.stdout)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "reject by dev: not this week" in task["status"]["message"]["parts"][0]["text"]
    (decision,) = plan_of(task)["decisions"]
    assert (decision["decision"], decision["note"], decision["decidedBy"]) == (
        "reject", "not this week", "dev",
    )  # fmt: skip
    assert plan_of(task)["items"][0]["status"] != "done"
    # Nothing waits now: a second reject says so and changes nothing.
    again = cli(server, "tasks", "reject", task_id, key=key)
    assert again.returncode == 1 and "asks nothing now" in again.stdout


def test_send_repo_at_a_ref_with_a_slash(start_agent: StartAgent, tmp_path: Path) -> None:
    bare, shas = make_repo(tmp_path)
    git(bare, "branch", "release/1.2", shas["two"])
    server = start_agent("serve", "cli-7", A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/")
    plan = write_plan(tmp_path / "bump.json", [
        item("bump", "sed -i 's/two/four/' README.md", "grep -q 'version four' README.md"),
    ])  # fmt: skip
    url = f"file://{bare}"
    done = cli(server, "send", "--plan", str(plan), "--repo", f"{url}@release/1.2", "--watch",
               "--json")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    task = json.loads(done.stdout)
    assert task["metadata"]["workspace"] == {
        "source": "git", "url": url, "ref": "release/1.2", "startCommit": shas["two"],
    }  # fmt: skip
    # Without a ref: the URL whole (its default branch).
    head = cli(server, "send", "--plan", str(plan), "--repo", url, "--watch", "--json")
    assert head.returncode == 1, head.stdout  # main says "three": the verify cannot pass
    assert json.loads(head.stdout)["metadata"]["workspace"]["startCommit"] == shas["three"]
    bad = cli(server, "send", "--plan", str(plan), "--repo", f"{url}@")
    assert bad.returncode != 0 and "is not URL@REF" in bad.stderr


def test_the_key_defaults_to_the_local_admin_key(start_agent: StartAgent, tmp_path: Path) -> None:
    server = start_agent("serve", "cli-8", A2A_AGENT_INSECURE_OPEN="0")
    assert (server.home / "admin.key").is_file()  # made at the first start
    plan = write_plan(tmp_path / "one.json", [item("a", "true", "true")])
    sent = cli(server, "send", "--plan", str(plan), "--watch", "--json")  # no key given
    assert sent.returncode == 0, sent.stdout + sent.stderr
    listed = json.loads(cli(server, "tasks", "list", "--json").stdout)
    assert [t["id"] for t in listed] == [json.loads(sent.stdout)["id"]]
    # A2A_AGENT_KEY comes before the file...
    wrong = cli(server, "tasks", "list", key="a2a_000000000000_nope")
    assert wrong.returncode == 1
    # The server's own words, and which key it refused.
    assert "refused the key in A2A_AGENT_KEY: this API key is not valid" in wrong.stderr
    # ...and without either there is no key to send.
    elsewhere = tmp_path / "no-home"
    elsewhere.mkdir()
    keyless = cli(server, "tasks", "list", home=elsewhere)
    assert keyless.returncode == 1
    assert f"refused no key (none given with --key or A2A_AGENT_KEY, and no {elsewhere}" in (
        keyless.stderr
    )
    assert "an API key is required" in keyless.stderr


def test_what_the_cli_is_given_wrong_it_says_plainly(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    server = start_agent("serve", "cli-9")  # no model configured
    not_json = tmp_path / "plan.json"
    not_json.write_text("nope")
    bad = cli(server, "send", "--plan", str(not_json))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert f"the plan file {not_json} is not JSON (line 1, column 1" in bad.stderr
    missing = cli(server, "send", "--plan", str(tmp_path / "none.json"))
    assert missing.returncode == 1 and "cannot reach" not in missing.stderr
    assert "cannot read the plan file" in missing.stderr and "No such file" in missing.stderr
    # A file that is neither a plan nor the data part {"plan": {...}}: which of the two to
    # give, rather than the server's "plan has unknown field(s) ['plan']".
    mixed = tmp_path / "mixed.json"
    mixed.write_text(json.dumps({"goal": "g", "plan": {"goal": "g", "items": []}}))
    both = cli(server, "send", "--plan", str(mixed))
    assert both.returncode == 1 and "unknown field" not in both.stderr
    assert f"""the plan file {mixed} has "plan" beside ['goal']: give the plan itself""" in (
        both.stderr
    )
    # Where the workspace starts, said twice.
    seeded = tmp_path / "seeded.json"
    seeded.write_text(json.dumps({"plan": {}, "workspace": {"fromTask": "t"}}))
    twice = cli(server, "send", "--plan", str(seeded), "--repo", "https://h/x.git")
    assert twice.returncode == 1 and "and so does --repo: give one of them" in twice.stderr
    # A goal this server cannot work (no model): refused at once, and `send` says so.
    goal = cli(server, "send", "write hello")
    assert goal.returncode == 2, goal.stdout + goal.stderr
    (task_id,) = goal.stdout.split()
    assert f"task {task_id} is rejected:" in goal.stderr and "model" in goal.stderr
    # The list shows whole ids at any width (80 columns here), so `tasks show` takes them.
    listed = cli(server, "tasks", "list")
    assert task_id in listed.stdout, listed.stdout
    assert cli(server, "tasks", "show", task_id).returncode == 0
    diff = cli(server, "tasks", "diff", task_id)
    assert diff.returncode == 1 and "is rejected and has no diff" in diff.stdout + diff.stderr
    # Output piped to a reader that stopped (`| head -1`) is not an unreachable server: the
    # command ends as one killed by SIGPIPE would, saying nothing (no "cannot reach", no
    # "Exception ignored ... BrokenPipeError" at exit), with print() and with rich alike.
    for args in (("tasks", "list", "--json"), ("tasks", "list"), ("tasks", "show", task_id)):
        closed = cli_to_closed_pipe(server, *args)
        assert (closed.returncode, closed.stderr) == (141, ""), (args, closed)
