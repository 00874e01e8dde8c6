"""The workflow body's control flow, apart from its steps: the outcomes that end or restart
work as exceptions, the retry policy of the steps DBOS keeps, and the names of rounds."""

from __future__ import annotations

from typing import Any

from persistence.errors import StoreUnavailable


def _database_outage(exc: BaseException) -> bool:
    return isinstance(exc, StoreUnavailable)


# Steps retry only while the database is unreachable (about four minutes in all); any other
# error is a real failure of the step and ends the run with its reason. (The journal's
# `OutageRetry` is the same policy for the runs it keeps.)
OUTAGE_RETRY: dict[str, Any] = {
    "retries_allowed": True,
    "max_attempts": 12,
    "interval_seconds": 1.0,
    "backoff_rate": 1.5,
    "should_retry": _database_outage,
}


class RunStopped(Exception):
    """A step said the run has ended (cancel, budget stop, a failure already recorded)."""


class RunPaused(Exception):
    """A step asked a person: this segment of the run ends; a reply starts the next."""


class ItemRestart(Exception):
    """A step restored the workspace: the item starts again as `attempt`."""

    def __init__(self, attempt: int) -> None:
        super().__init__(attempt)
        self.attempt = attempt


class Rounds:
    """Names re-verification rounds by the segment and their order in it: a pure function of
    the run's position, the same when a crash replays the workflow."""

    def __init__(self, segment: int) -> None:
        self.segment = segment
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"s{self.segment}.{self.count}"


def plan_check(snap: dict[str, Any], lean: bool) -> bool:
    """Whether the plan's own check has steps to run: always in runs begun before
    `lean-steps`, else only when the plan has a top-level verify."""
    return not lean or bool(snap.get("acceptance"))
