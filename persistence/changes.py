"""The one way a task changes: `apply_task_change()` in functions.sql, called with a
TaskChange as JSON. A submission, a cancel, a budget alert and every recorded step (through
`record_step()`) go through it, so transitions, the task row, its derived summary, its events
and the NOTIFY are written the same way everywhere, in the caller's transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from persistence.db import Conn
from persistence.records import JSON, Transition
from persistence.safe import jsonb
from persistence.sql import q


def transition_json(t: Transition) -> JSON:
    data = dataclasses.asdict(t)
    data["at"] = t.at.isoformat() if t.at is not None else None
    return data


@dataclass(frozen=True)
class TaskChange:
    """What a transaction changes on a task. `state` None keeps the status as it is."""

    transitions: Sequence[Transition] = field(default_factory=list)
    state: str | None = None
    status_text: str | None = None
    items_changed: bool = False
    # metadata.progress and metadata.verification, when the items changed (views.plan_summary)
    summary: JSON | None = None
    charged: bool = False
    report: JSON | None = None
    fingerprint: str | None = None
    checkpoint_sha: str | None = None
    metadata_patch: JSON | None = None
    policy_patch: JSON | None = None
    # The task ends while no segment of its run is there to close its record (the engine
    # ended that run): number one of its own, for the caller to start.
    closing_segment: bool = False

    def as_json(self) -> JSON:
        data: dict[str, Any] = dataclasses.asdict(self)
        data["transitions"] = [transition_json(t) for t in self.transitions]
        return data


async def apply_change(
    conn: Conn, task_id: str, change: TaskChange, *, seq: int, event_seq: int
) -> None:
    """Write `change`. `seq`/`event_seq` are the task's counters as locked; each is advanced
    by what is written, so there is never a gap."""
    await conn.execute(
        q("apply_task_change"),
        {"task_id": task_id, "change": jsonb(change.as_json()), "seq": seq, "event_seq": event_seq},
        prepare=True,
    )
