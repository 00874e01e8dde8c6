"""plan.json and progress.md, rendered from the stored items and transitions.

Both files are derived from the database on every transition, so a step that re-runs after a
crash rewrites them identically instead of appending a second entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Protocol

from a2a_agent.harness.kernel.evidence import output_in_words
from a2a_agent.wire import to_wire
from persistence.records import ItemRow
from persistence.views import (
    item_view,
    precheck_result,
    progress_counts,
    regressed,
    reopenings,
    reverify_results,
    verification_counts,
)


class TransitionLike(Protocol):
    """A recorded transition, or one about to be recorded (a verified item's own `done`)."""

    @property
    def item_id(self) -> str | None: ...
    @property
    def attempt(self) -> int | None: ...
    @property
    def from_state(self) -> str | None: ...
    @property
    def to_state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def at(self) -> datetime | None: ...


def item_line(item: ItemRow) -> str:
    """An item's line of plan.json: the item as the plan artifact shows it (`views.item_view`,
    the one place either is made), written by the C encoder."""
    # sort_keys: a dict read back from jsonb has its keys in another order
    return json.dumps(to_wire(item_view(item)), ensure_ascii=False, sort_keys=True)


class ItemLines:
    """A task's items' lines of plan.json as last written: a step changes an item or two, and
    only theirs are made again (every item's, with its history, was most of a step's time)."""

    def __init__(self) -> None:
        self._lines: dict[str, tuple[ItemRow, str]] = {}

    def line(self, item: ItemRow) -> str:
        found = self._lines.get(item.item_id)
        # A row read again (a new object) is the same row when its fields are; its clock
        # is not in its view.
        if found is not None and found[0].same_row(item):
            return found[1]
        line = item_line(item)
        self._lines[item.item_id] = (item, line)
        return line


def plan_document(
    task_id: str, goal: str, items: Sequence[ItemRow], lines: ItemLines | None = None
) -> str:
    """The plan as JSON, one item per line (readable; `item_line`), from `lines` where an
    item's is kept."""
    rows = [lines.line(i) if lines is not None else item_line(i) for i in items]
    goal_json = json.dumps(goal, ensure_ascii=False)
    head = f'{{\n  "taskId": {json.dumps(task_id)},\n  "goal": {goal_json},\n  "items": '
    if not rows:
        return head + "[]\n}\n"
    return head + "[\n" + ",\n".join(f"    {row}" for row in rows) + "\n  ]\n}\n"


def _stamp(at: datetime | None) -> str:
    moment = (at or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _next_item(items: Sequence[ItemRow]) -> str:
    cut = [i.item_id for i in items if i.status == "interrupted"]
    if cut:
        return f"nothing: the run ended while item `{cut[0]}` was under way (interrupted)"
    for item in items:
        if item.status not in ("done", "failed"):
            return f"item `{item.item_id}`: {item.title}"
    return "nothing; every item has an outcome"


def transition_line(t: TransitionLike) -> str:
    """One progress entry; rendered once per transition and kept (see StepContext)."""
    subject = "task" if t.item_id is None else f"item `{t.item_id}`"
    attempt = f" (attempt {t.attempt})" if t.attempt else ""
    change = t.to_state if t.from_state is None else f"{t.from_state} -> {t.to_state}"
    return f"- {_stamp(t.at)}: {subject}{attempt} {change}: {t.reason}"


def _checks_in_words(items: Sequence[ItemRow]) -> str:
    counts = verification_counts(items)
    weak = [i.item_id for i in items if precheck_result(i) == "weak"]
    words = [f"{counts['failed_before_passed_after']} failed before the work and passed after it"]
    if weak:
        words.append(f"weak (passed before any work): {', '.join(weak)}")
    if counts["precheck_skipped"]:
        words.append(f"{counts['precheck_skipped']} not checked before the work")
    reverified = [i for i in items if reverify_results(i)]
    if reverified:
        passing = sum(1 for i in reverified if reverify_results(i)[-1].get("result") == "passed")
        words.append(f"{passing} of {len(reverified)} still passed when run again after later work")
    for item in items:
        if regressed(item):
            found = [r for r in reverify_results(item) if r.get("result") == "regressed"][-1]
            culprit = (found.get("broken_by") or {}).get("item")
            words.append(
                f"`{item.item_id}` regressed"
                + (f" (broken by `{culprit}`)" if culprit else "")
                + (" and was reopened" if reopenings(item) else "")
                + (" and was skipped" if item.status == "skipped" else "")
            )
    return "; ".join(words)


def progress_document(
    task_id: str, goal: str, items: Sequence[ItemRow], entries: Sequence[str]
) -> str:
    """progress.md from the items and the transitions' entries (`transition_line`)."""
    lines = [
        f"# Progress: {goal}",
        "",
        f"Task `{task_id}`. Written by the harness from its records at every transition;",
        "the newest entry is last.",
        "",
    ]
    lines += entries
    progress = progress_counts(items)
    lines += [
        "",
        "## Now",
        "",
        f"- Done: {progress['items_done']} of {progress['items_total']}; "
        f"failed: {progress['items_failed']}.",
        f"- Next: {_next_item(items)}.",
        f"- Checks: {_checks_in_words(items)}.",
    ]
    for item in items:
        if item.status == "failed" and item.evidence:
            ev = item.evidence
            lines += [
                "",
                f"## Failure of item `{item.item_id}`",
                "",
                f"`{ev.get('command')}` exited {ev.get('exit_code')}. "
                + output_in_words(str(ev.get("output_tail", "")), fenced=True),
            ]
    return "\n".join(lines) + "\n"
