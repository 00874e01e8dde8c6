"""How the CLI shows tasks in a terminal (rich): a table of tasks, one task's plan and
evidence, and the live view `tasks watch` redraws."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import Artifact, StreamResponse, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

COLORS = {
    "completed": "green",
    "failed": "red",
    "canceled": "yellow",
    "rejected": "red",
    "input_required": "magenta",
    "working": "cyan",
    "submitted": "blue",
}
LAST_ENTRIES = 8  # the progress entries the live view shows
ITEM_COLORS = {"done": "green", "failed": "red", "regressed": "red", "skipped": "yellow",
               "interrupted": "magenta",
               "in_progress": "cyan", "verifying": "cyan"}  # fmt: skip


def state_name(task: Task) -> str:
    return str(TaskState.Name(task.status.state)).removeprefix("TASK_STATE_").lower()


def status_text(status: TaskStatus) -> str:
    """What a status says (its message's first part), or ""."""
    return status.message.parts[0].text if status.message.parts else ""


def _data(task: Task, artifact_id: str, key: str) -> dict[str, Any] | None:
    for artifact in task.artifacts:
        if artifact.artifact_id == artifact_id:
            for data in get_data_parts(artifact.parts):
                if isinstance(data, dict) and key in data:
                    return dict(data[key])
    return None


def plan_of(task: Task) -> dict[str, Any]:
    return _data(task, "plan", "plan") or {"goal": "", "items": []}


def request_of(task: Task) -> dict[str, Any] | None:
    """The request the task waits on a person for, if any."""
    for data in get_data_parts(task.status.message.parts):
        if isinstance(data, dict) and "approvalRequest" in data:
            return dict(data["approvalRequest"])
    return None


def goal_of(task: Task) -> str:
    plan = plan_of(task)
    if plan.get("goal"):
        return str(plan["goal"])
    for message in task.history[:1]:
        for part in message.parts:
            if part.text:
                return str(part.text)
    return ""


def _styled(state: str) -> Text:
    return Text(state, style=COLORS.get(state, ""))


def tasks_table(tasks: list[Task], total: int = 0) -> Table:
    """The tasks listed, and how many of `total` they are when that is more (a page)."""
    title = f"{len(tasks)} of {total} tasks, the latest changed" if total > len(tasks) else ""
    table = Table(title=title or f"{len(tasks)} task(s)", show_lines=False)
    # The id whole, even in a narrow terminal: a cut one cannot be used with `tasks show`.
    table.add_column("task", no_wrap=True, min_width=36)
    for column in ("state", "goal", "items", "updated"):
        table.add_column(column)
    for task in tasks:
        progress = dict(MessageToDict(task.metadata).get("progress") or {})
        items = f"{int(progress.get('itemsDone', 0))}/{int(progress.get('itemsTotal', 0))}"
        updated = task.status.timestamp.ToDatetime().strftime("%Y-%m-%d %H:%M:%S")
        table.add_row(task.id, _styled(state_name(task)), goal_of(task)[:60], items, updated)
    return table


def _items(task: Task) -> Table:
    table = Table(show_header=True, expand=True)
    for column in ("item", "status", "attempts", "verify", "exit", "commit"):
        table.add_column(column)
    for item in plan_of(task).get("items") or []:
        evidence = item.get("evidence") or {}
        status = str(item.get("status"))
        table.add_row(
            str(item.get("id")),
            Text(status, style=ITEM_COLORS.get(status, "")),
            str(int(item.get("attempts") or 0)),
            str(item.get("verify"))[:50],
            "" if evidence.get("exitCode") is None else str(int(evidence["exitCode"])),
            str(item.get("commit") or "")[:10],
        )
    return table


def _family(task: Task) -> list[RenderableType]:
    """Its parent run and its delegates, one line each (`tasks tree` draws the whole tree)."""
    metadata = MessageToDict(task.metadata)
    lines: list[RenderableType] = []
    if metadata.get("parent"):
        lines.append(Text(f"delegated by: {metadata['parent']}"))
    for d in metadata.get("delegations") or []:
        who = (
            f"peer {d.get('peer')} task {d.get('remoteTask')}"
            if d.get("peer")
            else (f"child run {d.get('child')}")
        )
        state = d.get("remoteState") or d.get("state")
        lines.append(Text(f"delegate ({d.get('item')}): {who}: {state}"))
    return lines


def _budget(task: Task) -> Table:
    budget = dict(MessageToDict(task.metadata).get("budget") or {})
    table = Table.grid(padding=(0, 1))
    for name in ("usd", "tokens", "wallS", "actions", "stepsWithoutProgress"):
        found = budget.get(name) or {}
        used, limit = found.get("used"), found.get("limit")
        if used is None or not limit:
            continue
        share = min(1.0, float(used) / float(limit))
        table.add_row(
            name, ProgressBar(total=1.0, completed=share, width=30), f"{used:g} of {limit:g}"
        )
    return table


def task_table(task: Task) -> RenderableType:
    """One task as a person reads it: state, goal, items, budget, what it asks."""
    state = state_name(task)
    text = status_text(task.status)
    parts: list[RenderableType] = [
        Text.assemble(("state: ", "bold"), _styled(state)),
        Text(f"goal: {goal_of(task)}"),
        Text(text, style="dim"),
        *_family(task),
        _items(task),
        _budget(task),
    ]
    request = request_of(task)
    if request is not None:
        options = " | ".join(request.get("options") or [])
        parts.append(
            Panel(f"{request.get('summary')}\n\noptions: {options}", title=f"asks: {request['id']}")
        )
    return Panel(Group(*parts), title=task.id)


class News:
    """The task's progress entries, made from its event log as a subscriber receives it
    (SubscribeToTask from the first event): every status it reported, with its text, and
    every change of an item's status or a decision that the plan artifact events show. A
    status sampled by polling would miss whatever came and went between two polls."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.seq = 0  # the last event taken (what a resumed stream starts after)
        self.status: tuple[int, int] | None = None  # (state, µs) of the last status taken
        self._items: dict[str, str] = {}
        self._decided: set[str] = set()

    def take(self, response: StreamResponse) -> None:
        which = response.WhichOneof("payload")
        if which == "status_update":
            self._status(response.status_update.status)
            metadata = response.status_update.metadata
        elif which == "artifact_update":
            if response.artifact_update.artifact.artifact_id == "plan":
                self._plan(response.artifact_update.artifact)
            metadata = response.artifact_update.metadata
        else:
            return
        if "seq" in metadata:
            self.seq = max(self.seq, int(metadata["seq"]))

    def caught_up(self, task: Task) -> bool:
        """Has the log been read up to the task's status as GetTask shows it?"""
        stamp = task.status.timestamp.ToMicroseconds()
        return self.status == (task.status.state, stamp)

    def sample(self, task: Task) -> None:
        """The task's status as GetTask shows it, when it is not the last one taken."""
        if not self.caught_up(task):
            self._status(task.status)

    def _status(self, status: TaskStatus) -> None:
        self.status = (status.state, status.timestamp.ToMicroseconds())
        at = status.timestamp.ToDatetime(tzinfo=UTC).astimezone().strftime("%H:%M:%S")
        state = str(TaskState.Name(status.state)).removeprefix("TASK_STATE_").lower()
        text = status_text(status)
        self.entries.append(f"{at} {state}" + (f": {text}" if text else ""))

    def _plan(self, artifact: Artifact) -> None:
        plan: dict[str, Any] = {}
        for data in get_data_parts(artifact.parts):
            if isinstance(data, dict) and "plan" in data:
                plan = dict(data["plan"])
        for item in plan.get("items") or []:
            name, status = str(item.get("id")), str(item.get("status"))
            was = self._items.get(name, "pending")
            self._items[name] = status
            if status == was:
                continue
            exit_code = (item.get("evidence") or {}).get("exitCode")
            about = [f"attempt {int(item.get('attempts') or 0)}"]
            if exit_code is not None and status not in ("in_progress", "pending"):
                about.append(f"exit {int(exit_code)}")
            self.entries.append(f"  item {name}: {was} -> {status} ({', '.join(about)})")
        for decision in plan.get("decisions") or []:
            if decision.get("status") != "decided" or decision.get("id") in self._decided:
                continue
            self._decided.add(str(decision.get("id")))
            by = f" by {decision['decidedBy']}" if decision.get("decidedBy") else ""
            note = f": {decision['note']}" if decision.get("note") else ""
            self.entries.append(
                f"  decided {decision.get('id')}: {decision.get('decision')}{by}{note}"
            )


class WatchView:
    """What `tasks watch` redraws: a bar over the items, the current one, budget bars and
    the last progress entries."""

    def __init__(self, live: Live | None, console: Console, *, quiet: bool = False) -> None:
        self.live = live
        self.console = console
        self.quiet = quiet
        self.printed = 0

    def update(self, task: Task, entries: list[str]) -> None:
        if self.live is None:
            # Not a terminal (a pipe, a log): each entry once, as it comes.
            if not self.quiet:
                for entry in entries[self.printed :]:
                    self.console.print(entry, soft_wrap=True, markup=False)
            self.printed = len(entries)
            return
        progress = dict(MessageToDict(task.metadata).get("progress") or {})
        total = int(progress.get("itemsTotal", 0))
        done = int(progress.get("itemsDone", 0))
        bar = ProgressBar(total=max(total, 1), completed=done, width=40)
        current = progress.get("currentItem") or "-"
        body = Group(
            Text.assemble(("state: ", "bold"), _styled(state_name(task))),
            Text.assemble(("items: ", "bold"), f"{done} of {total}  "),
            bar,
            Text(f"now: {current}"),
            _budget(task),
            Text("\n".join(entries[-LAST_ENTRIES:]), style="dim"),
        )
        self.live.update(Panel(body, title=task.id))


@contextmanager
def watch_view(console: Console, *, disabled: bool) -> Iterator[WatchView]:
    if disabled or not console.is_terminal:
        yield WatchView(None, console, quiet=disabled)
        return
    with Live(console=console, refresh_per_second=4) as live:
        yield WatchView(live, console)
