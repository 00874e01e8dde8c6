"""What the dashboard's pages show, made from rows: pure functions, no I/O, so the pages are
as the records are (a run on another machine shows the same)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from persistence.records import JSON, TransitionRow

BUDGET_DIMENSIONS = ("usd", "tokens", "wall_s", "actions", "steps_without_progress")
RERAN = "re-ran after the worker was lost"


def age(at: datetime | str | None, now: datetime | None = None) -> str:
    """How long ago, in words a person reads at a glance."""
    if at is None:
        return ""
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    seconds = max(0.0, ((now or datetime.now(UTC)) - moment).total_seconds())
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


@dataclass(frozen=True)
class Gauge:
    name: str
    used: float
    limit: float
    pause_pct: int

    @property
    def pct(self) -> float:
        return min(100.0, 100.0 * self.used / self.limit) if self.limit else 0.0

    @property
    def level(self) -> str:
        if self.pct >= self.pause_pct:
            return "high"
        return "mid" if self.pct >= 50 else "low"


def gauges(budget: JSON | None, pause_pct: int) -> list[Gauge]:
    """One gauge per budget dimension that has a limit (marks at 50 % and the pause point)."""
    found = []
    for name in BUDGET_DIMENSIONS:
        entry = (budget or {}).get(name) or {}
        used, limit = entry.get("used"), entry.get("limit")
        if used is not None and limit:
            found.append(Gauge(name, float(used), float(limit), pause_pct))
    return found


@dataclass(frozen=True)
class Mark:
    """One entry of the timeline."""

    at: datetime
    subject: str
    change: str
    reason: str
    kind: str  # done | failed | pause | rerun | restore | note | start


def _kind(t: TransitionRow) -> str:
    if RERAN in t.reason:
        return "rerun"
    if "restored checkpoint" in t.reason:
        return "restore"
    if t.to_state == "input_required":
        return "pause"
    if t.to_state in ("done", "completed"):
        return "done"
    if t.to_state in ("failed", "regressed", "canceled", "rejected"):
        return "failed"
    if t.from_state == t.to_state:
        return "note"
    return "start"


def timeline(transitions: Sequence[TransitionRow]) -> list[Mark]:
    return [
        Mark(
            at=t.at,
            subject="task"
            if t.item_id is None
            else f"{t.item_id}" + (f" #{t.attempt}" if t.attempt else ""),
            change=t.to_state
            if t.from_state in (None, t.to_state)
            else f"{t.from_state} → {t.to_state}",
            reason=t.reason,
            kind=_kind(t),
        )
        for t in transitions
    ]


@dataclass(frozen=True)
class Band:
    """A stretch of the task's life in one state, placed on a 0..100 axis."""

    state: str
    left: float
    width: float
    title: str


def bands(transitions: Sequence[TransitionRow], now: datetime) -> list[Band]:
    """The task's states over time (working, waiting for a person, ...), for the strip above
    the timeline: a pause shows as its own band; a crash re-run as a tick (see `ticks`)."""
    task_level = [t for t in transitions if t.item_id is None and t.from_state != t.to_state]
    if not task_level:
        return []
    start = task_level[0].at
    end = (
        now
        if task_level[-1].to_state not in ("completed", "failed", "canceled", "rejected")
        else task_level[-1].at
    )
    span = max((end - start).total_seconds(), 1e-6)
    found = []
    for this, after in zip(task_level, [*task_level[1:], None], strict=True):
        until = after.at if after is not None else end
        left = 100.0 * (this.at - start).total_seconds() / span
        width = max(0.4, 100.0 * (until - this.at).total_seconds() / span)
        found.append(Band(this.to_state, left, min(width, 100.0 - left), this.reason[:200]))
    return found


def ticks(transitions: Sequence[TransitionRow], now: datetime) -> list[tuple[float, str]]:
    """Where crash re-runs happened on the same axis as `bands`."""
    task_level = [t for t in transitions if t.item_id is None and t.from_state != t.to_state]
    if not task_level:
        return []
    start = task_level[0].at
    end = max(now, start)
    span = max((end - start).total_seconds(), 1e-6)
    return [
        (100.0 * (t.at - start).total_seconds() / span, t.reason[:200])
        for t in transitions
        if RERAN in t.reason
    ]


def facts(metadata: JSON, now: datetime) -> list[dict[str, Any]]:
    shown = []
    for key, fact in sorted((metadata.get("facts") or {}).items()):
        shown.append(
            {
                "key": key,
                "value": str(fact.get("value", ""))[:200],
                "source": fact.get("source"),
                "age": age(fact.get("checked_at"), now),
                "max_age_s": fact.get("max_age_s"),
            }
        )
    return shown
