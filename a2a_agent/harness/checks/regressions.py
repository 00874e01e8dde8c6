"""What a re-verification round found, as records: pure functions of the items and the checks'
evidence, no I/O (`reverify.py` runs the checks; `decisions.py` applies a person's answer).

An item's history keeps what each round found on the attempt that was verified:
`{"attempt": n, ..., "reverify": [{"round", "at_commit", "result": "passed" | "regressed",
"exit_code", "duration_s", "runs", ...}]}` (every regression, and the latest pass); an attempt
that reopens the item starts with `{"attempt": n + 1, "reopened": {"round", "why"}}`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.results import JSON
from persistence.records import (
    ItemChange,
    ItemRow,
    PauseRequest,
    StepRecord,
    StepView,
    Transition,
)
from persistence.views import reopenings

REOPEN_LIMIT = 2  # times one item may be reopened by the policy (a person may reopen more)


def with_reverify(item: ItemRow, found: JSON) -> list[JSON]:
    """The item's history with `found` added to its current attempt: a pass replaces the
    previous pass (regressions are all kept), so the history stays small."""
    history = [dict(entry) for entry in item.history]
    for entry in history:
        if entry.get("attempt") == item.attempts:
            kept = [r for r in entry.get("reverify") or [] if r.get("result") != "passed"]
            entry["reverify"] = [*kept, found]
            return history
    return [*history, {"attempt": item.attempts, "reverify": [found]}]


def reopened(item: ItemRow, history: list[JSON], why: str, round_id: str) -> ItemChange:
    """The item worked again: back to pending, its next attempt marked as a reopening, its
    attempts its own again."""
    again = dataclasses.replace(item, history=history)
    return ItemChange(
        item_id=item.item_id,
        status="pending",
        attempts=item.attempts,
        failures=0,
        history=with_attempt(again, item.attempts + 1, reopened={"round": round_id, "why": why}),
    )


def _split(changes: Sequence[ItemChange]) -> tuple[ItemChange | None, list[ItemChange]]:
    return (changes[0], list(changes[1:])) if changes else (None, [])


@dataclass(frozen=True)
class Regression:
    """One round: which done items were checked again at `head`, what each check gave
    (command evidence) and, for each that failed, what the bisect found."""

    view: StepView
    key: str
    round_id: str
    head: str
    checked: list[tuple[str, JSON]]
    found: dict[str, JSON] = field(default_factory=dict)
    restored: str | None = None

    def _passed(self, shown: JSON) -> bool:
        return shown["exit_code"] == 0 and not shown["timed_out"]

    def regressed_items(self) -> list[ItemRow]:
        return [self.view.item(i) for i, shown in self.checked if not self._passed(shown)]

    def entry(self, item_id: str, shown: JSON) -> JSON:
        found: JSON = {
            "round": self.round_id,
            "at_commit": self.head,
            "result": "passed" if self._passed(shown) else "regressed",
            "exit_code": shown["exit_code"],
            "duration_s": shown["duration_s"],
            "runs": shown["runs"],
        }
        if not self._passed(shown):
            bisect = self.found.get(item_id, {})
            found |= {
                "command": shown["command"],
                "output_tail": shown["output_tail"],
                "timed_out": shown["timed_out"],
                "broken_by": (
                    {"item": bisect.get("item"), "commit": bisect.get("commit")}
                    if bisect.get("found")
                    else None
                ),
                "bisect": bisect,
            }
        return found

    def histories(self) -> dict[str, list[JSON]]:
        return {
            item_id: with_reverify(self.view.item(item_id), self.entry(item_id, shown))
            for item_id, shown in self.checked
        }

    def reason_of(self, item: ItemRow) -> str:
        shown = dict(self.checked)[item.item_id]
        bisect = self.found.get(item.item_id, {})
        # A check killed at its timeout did not fail by itself: say so, not "exited 124".
        failed = (
            f"timed out after {item.verify_timeout_s} s"
            if shown["timed_out"]
            else f"exited {shown['exit_code']}"
        )
        said = f"its check `{item.verify_command}` {failed} when run again at {self.head[:12]}"
        if bisect.get("found"):
            culprit = f"item `{bisect['item']}`" if bisect.get("item") else "a commit"
            return f"{said}; broken by {culprit} (commit {str(bisect['commit'])[:12]})"
        return f"{said}; {bisect.get('why', 'what broke it is not known')}"

    def summary(self) -> str:
        regressed = self.regressed_items()
        said = "; ".join(f"`{i.item_id}`: {self.reason_of(i)}" for i in regressed)
        return (
            f"Re-verified {len(self.checked)} done item(s) at {self.head[:12]}: "
            f"{len(regressed)} no longer pass ({said})."
        )

    def shown(self) -> list[JSON]:
        """The regressed items as a request shows them."""
        checked = dict(self.checked)
        return [
            {
                "item": i.item_id,
                "title": i.title,
                "verify": i.verify_command,
                "exit_code": checked[i.item_id]["exit_code"],
                "output_tail": str(checked[i.item_id]["output_tail"])[-1500:],
                "broken_by": self.entry(i.item_id, checked[i.item_id])["broken_by"],
                "reopened": reopenings(i),
            }
            for i in self.regressed_items()
        ]

    def _restored_note(self) -> list[Transition]:
        if self.restored is None:
            return []
        return [Transition(to_state="working", from_state="working", reason=self.restored)]

    def passed_record(self) -> StepRecord:
        histories = self.histories()
        first, more = _split(
            [
                ItemChange(item_id=i, status="done", attempts=self.view.item(i).attempts,
                           history=h)
                for i, h in histories.items()
            ]
        )  # fmt: skip
        return StepRecord(
            effect_key=self.key,
            step="reverify_round",
            result={"outcome": "ok", "round": self.round_id, "at_commit": self.head},
            item=first,
            more_items=more,
            transitions=[
                *self._restored_note(),
                Transition(
                    to_state="working",
                    from_state="working",
                    reason=f"re-verified {len(self.checked)} done item(s) at "
                    f"{self.head[:12]}: every check still passes",
                ),
            ],
        )

    def regressed_record(
        self,
        *,
        outcome: str,
        reopen: Sequence[ItemChange] = (),
        task_state: str | None = None,
        status_text: str | None = None,
        extra: Sequence[Transition] = (),
        pause: PauseRequest | None = None,
    ) -> StepRecord:
        histories = self.histories()
        checked = dict(self.checked)
        reopening = {c.item_id: c for c in reopen}
        changes = []
        for item_id, history in histories.items():
            item = self.view.item(item_id)
            if item_id in reopening:
                changes.append(reopening[item_id])
            elif self._passed(checked[item_id]):
                changes.append(
                    ItemChange(item_id=item_id, status="done", attempts=item.attempts,
                               history=history)
                )  # fmt: skip
            else:
                changes.append(
                    ItemChange(
                        item_id=item_id,
                        status="regressed",
                        attempts=item.attempts,
                        evidence=self.entry(item_id, checked[item_id]),
                        history=history,
                    )
                )
        first, more = _split(changes)
        regressed = [
            Transition(
                item_id=i.item_id,
                attempt=i.attempts,
                from_state="done",
                to_state="regressed",
                reason=f"regressed: {self.reason_of(i)}",
            )
            for i in self.regressed_items()
        ]
        return StepRecord(
            effect_key=self.key,
            step="reverify_round",
            result={"outcome": outcome, "round": self.round_id, "at_commit": self.head},
            item=first,
            more_items=more,
            task_state=task_state,
            status_text=status_text,
            transitions=[*self._restored_note(), *regressed, *extra],
            pause=pause,
        )

    def items_after(self, record: StepRecord) -> list[ItemRow]:
        """The plan's items as `record` leaves them."""
        changes = {c.item_id: c for c in ([record.item] if record.item else []) + record.more_items}
        items = []
        for item in self.view.items:
            c = changes.get(item.item_id)
            if c is None:
                items.append(item)
                continue
            items.append(
                dataclasses.replace(
                    item,
                    status=c.status,
                    attempts=c.attempts,
                    evidence=c.evidence if c.evidence is not None else item.evidence,
                    history=c.history if c.history is not None else item.history,
                )
            )
        return items
