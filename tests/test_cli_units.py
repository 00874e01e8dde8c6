"""The CLI's parts that need no server: its help, `--repo URL@REF` parsing, the progress
entries `tasks watch` makes from a task's events (built here by the server's own
conversion), and the live view drawn in a terminal."""

from __future__ import annotations

import argparse
import io
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from a2a.types.a2a_pb2 import StreamResponse, Task, TaskState, TaskStatus
from rich.console import Console
from rich.live import Live

from a2a_agent import cli
from a2a_agent.client_cli import split_repo
from a2a_agent.client_view import LAST_ENTRIES, News, WatchView, tasks_table
from a2a_agent.edge.convert import to_event, with_event_id


def _commands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """A parser's subcommands: each one's line in the parser's help, and its own parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            lines = {shown.dest: shown.help for shown in action._choices_actions}
            return {name: (str(lines.get(name) or ""), sub) for name, sub in action.choices.items()}
    return {}


def _every_command(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    found = []
    for name, (line, sub) in _commands(parser).items():
        found.append(((*path, name), line, sub))
        found.extend(_every_command(sub, (*path, name)))
    return found


def test_every_command_says_what_it_does() -> None:
    """`a2a-agent --help`, `a2a-agent push --help` and the rest: every command and
    subcommand has a line saying what it does, and every argument says what it is."""
    silent = []
    for path, line, sub in _every_command(cli._parser()):
        if not line:
            silent.append(" ".join(path))
        silent.extend(
            f"{' '.join(path)} {action.dest}"
            for action in sub._actions
            if not isinstance(action, argparse._SubParsersAction) and not action.help
        )
    assert silent == []


def test_a_list_cut_at_a_page_says_so() -> None:
    tasks = [
        Task(id=f"t{n}", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)) for n in range(2)
    ]
    assert tasks_table(tasks, total=2).title == "2 task(s)"
    assert tasks_table(tasks, total=140).title == "2 of 140 tasks, the latest changed"


def test_push_help_names_its_commands() -> None:
    commands = _commands(cli._parser())
    line, push = commands["push"]
    assert "'dead'" in line and "'retry'" in line  # what the top-level help promises is there
    assert set(_commands(push)) == {"dead", "retry"}
    parsed = cli._parser().parse_args(["push", "retry", "t1", "--id", "hook"])
    assert (parsed.action, parsed.task_id, parsed.config_id) == ("retry", "t1", "hook")
    assert cli._parser().parse_args(["push", "dead"]).action == "dead"


@pytest.mark.parametrize(
    ("given", "url", "ref"),
    [
        ("https://h/tool.git@release/1.2", "https://h/tool.git", "release/1.2"),
        ("https://h/tool.git@main", "https://h/tool.git", "main"),
        ("https://h/tool.git", "https://h/tool.git", None),
        ("https://user:pw@h/tool.git", "https://user:pw@h/tool.git", None),
        ("https://user@h/tool.git@v2", "https://user@h/tool.git", "v2"),
        ("https://user@h", "https://user@h", None),
        ("git@github.com:org/tool.git", "git@github.com:org/tool.git", None),
        ("git@github.com:org/tool.git@feature/x", "git@github.com:org/tool.git", "feature/x"),
        ("ssh://git@h:2222/org/tool.git@v1.0", "ssh://git@h:2222/org/tool.git", "v1.0"),
        ("file:///srv/git/tool.git@release/1.2", "file:///srv/git/tool.git", "release/1.2"),
        ("/srv/git/tool.git@abc123", "/srv/git/tool.git", "abc123"),
        ("https://h/tool.git@a@b", "https://h/tool.git", "a@b"),
    ],
)
def test_repo_url_and_ref(given: str, url: str, ref: str | None) -> None:
    assert split_repo(given) == (url, ref)


@pytest.mark.parametrize("given", ["https://h/tool.git@", "git@h:@v1", "@main"])
def test_repo_without_a_url_or_a_ref_is_refused(given: str) -> None:
    with pytest.raises(SystemExit, match="is not URL@REF"):
        split_repo(given)


AT = "2025-03-01T10:00:00.123456+00:00"


def status(state: str, text: str, at: str = AT) -> dict[str, Any]:
    return {"kind": "status", "state": state, "text": text, "at": at, "data": None}


def plan(*items: tuple[str, str, int, int | None], decisions: Any = ()) -> dict[str, Any]:
    return {
        "kind": "artifact",
        "name": "plan",
        "data": {
            "goal": "g",
            "items": [
                {"id": i, "status": s, "attempts": n, "evidence": {"exit_code": e} if e is not None
                 else None}
                for i, s, n, e in items
            ],
            "decisions": list(decisions),
        },
    }  # fmt: skip


def as_response(seq: int, body: dict[str, Any]) -> StreamResponse:
    """What a subscriber receives for stored event `seq` (the server's conversion)."""
    event = to_event("t1", "c1", body)
    assert event is not None
    event = with_event_id(event, "t1", seq)
    if body["kind"] == "status":
        return StreamResponse(status_update=event)
    return StreamResponse(artifact_update=event)


def test_entries_from_the_event_log() -> None:
    log = [
        status("submitted", "Accepted; waiting for a worker."),
        plan(("a", "in_progress", 1, None), ("b", "pending", 0, None)),
        status("working", "Working on item a: A"),
        plan(("a", "verifying", 1, None), ("b", "pending", 0, None)),
        plan(("a", "done", 1, 0), ("b", "in_progress", 1, None)),
        plan(("a", "done", 1, 0), ("b", "failed", 1, 2)),
        plan(
            ("a", "done", 1, 0),
            ("b", "failed", 1, 2),
            decisions=[
                {
                    "id": "q1",
                    "status": "decided",
                    "decision": "skip",
                    "decided_by": "ops",
                    "note": "later",
                }
            ],
        ),
        status("failed", "Failed: b.", "2025-03-01T10:00:05+00:00"),
    ]
    news = News()
    for seq, body in enumerate(log, 1):
        news.take(as_response(seq, body))
    assert news.seq == len(log)
    at = datetime.fromisoformat(AT).astimezone().strftime("%H:%M:%S")
    assert news.entries[0] == f"{at} submitted: Accepted; waiting for a worker."
    assert news.entries[1:] == [
        "  item a: pending -> in_progress (attempt 1)",
        f"{at} working: Working on item a: A",
        "  item a: in_progress -> verifying (attempt 1)",
        "  item a: verifying -> done (attempt 1, exit 0)",
        "  item b: pending -> in_progress (attempt 1)",
        "  item b: in_progress -> failed (attempt 1, exit 2)",
        "  decided q1: skip by ops: later",
        news.entries[-1],
    ]
    assert news.entries[-1].endswith(" failed: Failed: b.")
    # The log has reached the status GetTask shows, and not an earlier one.
    task = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_FAILED))
    task.status.timestamp.FromDatetime(datetime(2025, 3, 1, 10, 0, 5, tzinfo=UTC))
    assert news.caught_up(task)
    task.status.state = TaskState.TASK_STATE_WORKING
    assert not news.caught_up(task)


def test_the_live_view_shows_the_last_entries() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    task = Task(id="t1", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    task.metadata.update({"progress": {"itemsTotal": 4, "itemsDone": 1, "currentItem": "b"}})
    entries = [f"entry number {n}" for n in range(20)]
    with Live(console=console, auto_refresh=False) as live:
        WatchView(live, console).update(task, entries)
        live.refresh()
    shown = out.getvalue()
    assert "items: 1 of 4" in shown and "now: b" in shown
    shown_entries = {int(n) for n in re.findall(r"entry number (\d+)", shown)}
    assert shown_entries == set(range(20 - LAST_ENTRIES, 20))  # the last ones only


def test_without_a_terminal_each_entry_is_printed_once() -> None:
    out = io.StringIO()
    view = WatchView(None, Console(file=out, width=200))
    task = Task(id="t1")
    view.update(task, ["one", "two"])
    view.update(task, ["one", "two", "three [b]x[/b]"])
    assert out.getvalue().splitlines() == ["one", "two", "three [b]x[/b]"]
