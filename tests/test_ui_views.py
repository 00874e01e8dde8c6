"""What the dashboard draws from rows, as pure functions: gauges and their levels against the
50 % and pause-point marks, the timeline's kinds of entry and the strip above it, ages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from a2a_agent.ui.views import RERAN, age, bands, gauges, ticks, timeline
from persistence.records import TransitionRow

T0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)


def test_a_gauge_per_limited_dimension_with_its_level() -> None:
    budget = {
        "usd": {"used": 4.0, "limit": 10.0},  # under half
        "tokens": {"used": 600, "limit": 1000},  # past half, before the pause point
        "wall_s": {"used": 75.0, "limit": 100},  # at the pause point and past it
        "actions": {"used": 30, "limit": None},  # no limit: no gauge
        "steps_without_progress": {"used": 900, "limit": 300},  # over: drawn full
    }
    shown = {g.name: g for g in gauges(budget, 70)}
    assert set(shown) == {"usd", "tokens", "wall_s", "steps_without_progress"}
    assert [(shown[n].pct, shown[n].level) for n in ("usd", "tokens", "wall_s")] == [
        (40.0, "low"), (60.0, "mid"), (75.0, "high"),
    ]  # fmt: skip
    assert shown["steps_without_progress"].pct == 100.0
    assert all(g.pause_pct == 70 for g in shown.values())
    assert gauges(None, 80) == [] and gauges({"usd": {"used": 1, "limit": 0}}, 80) == []


def row(s: float, item: str | None, was: str | None, now: str, why: str) -> TransitionRow:
    """A transition `s` seconds after T0 (attempt 1 for an item's)."""
    at = T0 + timedelta(seconds=s)
    return TransitionRow(int(s), item, 1 if item else None, was, now, why, at)


def test_the_timeline_marks_pauses_re_runs_and_notes() -> None:
    rows = [
        row(0, None, None, "submitted", "accepted"),
        row(1, None, "submitted", "working", "picked up"),
        row(2, "a", "pending", "in_progress", "begin"),
        row(4, "a", "in_progress", "in_progress", f"`run` of item `a` {RERAN}"),
        row(5, "a", "verifying", "done", "verified"),
        row(6, None, "working", "input_required", "irreversible deploy"),
        row(8, None, "input_required", "working", "approved by ops"),
        row(9, None, "working", "working", "note from the caller: hurry"),
        row(10, None, "working", "completed", "done"),
    ]  # fmt: skip
    kinds = [(m.subject, m.kind) for m in timeline(rows)]
    assert kinds == [
        ("task", "start"), ("task", "start"), ("a #1", "start"), ("a #1", "rerun"),
        ("a #1", "done"), ("task", "pause"), ("task", "start"), ("task", "note"), ("task", "done"),
    ]  # fmt: skip
    strip = bands(rows, T0 + timedelta(seconds=60))
    assert [b.state for b in strip] == ["submitted", "working", "input_required", "working",
                                        "completed"]  # fmt: skip
    pause = strip[2]
    assert (round(pause.left), round(pause.width)) == (60, 20)  # 6 s..8 s of 0..10 s
    ((left, why),) = ticks(rows, T0 + timedelta(seconds=10))
    assert left == 40.0 and "re-ran" in why


def test_ages_in_words() -> None:
    now = T0 + timedelta(hours=3, minutes=5)
    assert age(T0, now) == "3 h ago"
    assert age((now - timedelta(seconds=42)).isoformat(), now) == "42 s ago"
    assert age(now - timedelta(minutes=7), now) == "7 min ago"
    assert age(None, now) == ""
