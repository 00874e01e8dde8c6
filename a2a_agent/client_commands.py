"""The client's commands (`send`, `tasks ...`) on a parser: only argparse, so the server's
command line lists them without importing the client (the a2a-sdk's client and rich cost a
server's start about 0.3 s of CPU; `client_cli.py` runs them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

STATE_NAMES = frozenset(
    {"submitted", "working", "input_required", "auth_required", "completed", "failed",
     "canceled", "rejected"}
)  # fmt: skip
COMMANDS = frozenset({"send", "tasks"})
WATCH_EXITS = (
    "Exits 0 when the task completed, 1 when it failed, 2 when it was canceled or rejected, 3 "
    "when it waits for a person, 130 when interrupted."
)


def add_commands(sub: Any) -> None:
    """The client's commands on the main parser."""

    def common(parser: argparse.ArgumentParser, json: str | None = "the server's answer") -> None:
        """--url and --key, and --json saying what it prints (None: nothing to print)."""
        parser.add_argument(
            "--url", help="the server (A2A_AGENT_URL; default http://127.0.0.1:8000)"
        )
        parser.add_argument("--key", help="an API key (A2A_AGENT_KEY; default the local admin.key)")
        if json is not None:
            parser.add_argument("--json", action="store_true", help=f"print {json}, as JSON")

    send = sub.add_parser(
        "send",
        help="give the server a task: a goal, or a plan",
        description="Prints the new task's id and exits 0 once the server took it (1 or 2 "
        "when it refused it at once, saying why); with --watch, exits as `tasks watch` does.",
    )
    send.add_argument("goal", nargs="?", help="the goal in plain words")
    send.add_argument(
        "--plan",
        type=Path,
        metavar="FILE",
        help='a JSON file (- for stdin): the plan {"goal", "items", ...}, or the data part '
        '{"plan": {...}} as the README sends it, with "budget", "policy", "workspace" or '
        '"publish" beside the plan',
    )
    send.add_argument(
        "--repo",
        metavar="URL[@REF]",
        help="start from this repository, at REF (a branch, tag or commit; default its HEAD)",
    )
    send.add_argument(
        "--watch", action="store_true", help="then watch it until it ends or waits for a person"
    )
    common(send, "the task (with --watch: as it ended)")
    tasks = sub.add_parser("tasks", help="list, show, watch and steer tasks")
    actions = tasks.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="your tasks, the latest changed first (at most 100)")
    listing.add_argument("--state", choices=sorted(STATE_NAMES), help="only those in this state")
    common(listing, "the tasks")
    task_id = "the task's id (as `tasks list` shows it)"
    for name, what, json in (
        ("show", "a task: its items and their evidence, budget and what it waits for", "the task"),
        ("watch", "a live view until the task ends or waits for a person", "the task as it ended"),
        ("cancel", "stop a task", "the task as the server answered"),
        ("diff", "the task's changes as a diff (once it ended)", None),
        (
            "tree",
            "the tree of runs it belongs to: its parent, child runs and peers' tasks",
            "the tree",
        ),
    ):
        parser = actions.add_parser(
            name, help=what, description=WATCH_EXITS if name == "watch" else None
        )
        parser.add_argument("task_id", help=task_id)
        common(parser, json)
    for name in ("approve", "reject"):
        parser = actions.add_parser(
            name, help=f"{name} what the task waits for (its pending request)"
        )
        parser.add_argument("task_id", help=task_id)
        parser.add_argument("--note", default=None, help="a note kept with the decision")
        parser.add_argument(
            "--id", dest="request_id", help="the request (default: the pending one)"
        )
        common(parser)
