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


def add_commands(sub: Any) -> None:
    """The client's commands on the main parser."""

    def common(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--url", help="the server (A2A_AGENT_URL; default http://127.0.0.1:8000)"
        )
        parser.add_argument("--key", help="an API key (A2A_AGENT_KEY; default the local admin.key)")
        parser.add_argument("--json", action="store_true", help="print the server's answer as JSON")

    send = sub.add_parser("send", help="give the server a task: a goal, or a plan")
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
        "--repo", help="start from this repository: URL@REF (a branch, tag or commit)"
    )
    send.add_argument("--watch", action="store_true", help="then watch it until it ends")
    common(send)
    tasks = sub.add_parser("tasks", help="list, show, watch and steer tasks")
    actions = tasks.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="your tasks, newest first")
    listing.add_argument("--state", choices=sorted(STATE_NAMES), help="only those in this state")
    common(listing)
    for name, what in (
        ("show", "a task: its plan, evidence, budget and what it waits for"),
        ("watch", "a live view until the task ends or waits"),
        ("cancel", "stop a task"),
        ("diff", "the task's changes as a diff (once it ended)"),
        ("tree", "the tree of runs it belongs to: its parent, child runs and peers' tasks"),
    ):
        parser = actions.add_parser(name, help=what)
        parser.add_argument("task_id")
        common(parser)
    for name in ("approve", "reject"):
        parser = actions.add_parser(name, help=f"{name} what the task waits for")
        parser.add_argument("task_id")
        parser.add_argument("--note", default=None, help="a note kept with the decision")
        parser.add_argument(
            "--id", dest="request_id", help="the request (default: the pending one)"
        )
        common(parser)
