"""Every view derived from a task's items, computed here and only here.

An item's state is worked out in Python (`changed`: a step's change applied to the row it
read; `fresh`, `continued`: the rows a submission starts with), and so is what is shown of
it: the item as the plan artifact and plan.json show it (`item_view`), metadata.progress and
metadata.verification (`plan_summary`). The store sends the rows, their views and the summary
with the write; the SQL stores them as given and assembles the plan artifact from the stored
views (`apply_task_change()`), so that the two sides cannot count or show an item otherwise.
The harness renders plan.json, progress.md and the report from the same functions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from persistence.records import JSON, ItemChange, ItemRow, NewItem

# A changed definition (an approved plan change) may set these; `run` and `run_timeout_s`
# may be set to None (no run command; the server's timeout), the rest only to a value.
_DEFINITION = ("title", "verify_command", "verify_timeout_s", "max_attempts")
_NULLABLE_DEFINITION = ("run", "run_timeout_s")


def _fields(item: ItemRow | NewItem) -> dict[str, Any]:
    """An item's fields by name, their values as they are: its values are JSON already, and
    everything made from this is written out at once (`dataclasses.asdict` copied every
    item's history, deep, on every step)."""
    return {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}


def fresh(position: int, item: NewItem) -> ItemRow:
    """A planned item before any work."""
    return ItemRow(
        position=position,
        status="pending",
        attempts=0,
        evidence=None,
        commit_sha=None,
        failures=0,
        **_fields(item),
    )


def continued(item: ItemRow) -> ItemRow:
    """An earlier task's item in its continuation: done stays done (with its evidence,
    history and commit); anything else starts afresh."""
    if item.status == "done":
        return dataclasses.replace(item, elapsed_s=None)
    return dataclasses.replace(
        item,
        status="pending",
        attempts=0,
        evidence=None,
        commit_sha=None,
        history=[],
        elapsed_s=None,
    )


def changed(item: ItemRow, change: ItemChange) -> ItemRow:
    """`item` once `change` is recorded: what the change leaves out stays as it was."""
    definition = change.definition or {}
    fields: dict[str, Any] = {
        k: definition[k] for k in _DEFINITION if definition.get(k) is not None
    }
    fields |= {k: definition[k] for k in _NULLABLE_DEFINITION if k in definition}
    return dataclasses.replace(
        item,
        **fields,
        status=change.status,
        attempts=change.attempts,
        evidence=change.evidence if change.evidence is not None else item.evidence,
        commit_sha=change.commit_sha or item.commit_sha,
        failures=change.failures if change.failures is not None else item.failures,
        history=list(change.history) if change.history is not None else item.history,
    )


def stored_view(item: ItemRow) -> JSON:
    """The item as the plan shows it, but its history: kept on the row once (`items.view`),
    and joined to the history column when the plan artifact is assembled."""
    return {
        "id": item.item_id,
        "title": item.title,
        "status": item.status,
        "attempts": item.attempts,
        "max_attempts": item.max_attempts,
        "run": item.run,
        "run_timeout_s": item.run_timeout_s,
        "verify": item.verify_command,
        "verify_timeout_s": item.verify_timeout_s,
        "verify_independent": item.verify_independent,
        "timeout_s": item.timeout_s,
        "precheck": item.precheck,
        "irreversible": item.irreversible,
        "ask": item.ask,
        "delegate_to": item.delegate_to,
        "evidence": item.evidence,
        "commit": item.commit_sha,
    }


def item_view(item: ItemRow) -> JSON:
    """The item as the plan artifact and plan.json show it."""
    return {**stored_view(item), "history": item.history}


def row_json(item: ItemRow) -> JSON:
    """An item's row as the SQL writes it: its columns, and its view."""
    data = _fields(item)
    data.pop("elapsed_s")  # the database's clock keeps it
    data["view"] = stored_view(item)
    return data


# ---- what an item's attempts show ---------------------------------------------------------


def reverify_results(item: ItemRow) -> list[JSON]:
    """Every re-verification result the item's attempts hold, oldest first."""
    return [
        dict(found)
        for entry in item.history
        for found in entry.get("reverify") or []
        if isinstance(found, dict)
    ]


def reopenings(item: ItemRow) -> int:
    return sum(1 for entry in item.history if isinstance(entry.get("reopened"), dict))


def precheck_result(item: ItemRow) -> str | None:
    """fails_before, weak or skipped: what the item's pre-check found (None: not run)."""
    for entry in item.history:
        found = entry.get("precheck") if entry.get("attempt") == 0 else None
        if isinstance(found, dict):
            return str(found.get("result"))
    return None


def regressed(item: ItemRow) -> bool:
    """Whether a re-verification ever found the item's check failing after it was done."""
    return any(r.get("result") == "regressed" for r in reverify_results(item))


def last_reverified(item: ItemRow) -> str | None:
    """passed or regressed: what the last re-verification of the item found (None: none)."""
    found = reverify_results(item)
    return str(found[-1].get("result")) if found else None


# ---- the plan's summary -------------------------------------------------------------------


def progress_counts(items: Sequence[ItemRow]) -> JSON:
    """metadata.progress: how far the plan is, and the item under way."""
    by_status: dict[str, int] = {}
    for i in items:
        by_status[i.status] = by_status.get(i.status, 0) + 1
    current = next((i.item_id for i in items if i.status in ("in_progress", "verifying")), None)
    return {
        "items_total": len(items),
        "items_done": by_status.get("done", 0),
        "items_failed": by_status.get("failed", 0),
        "items_skipped": by_status.get("skipped", 0),
        "items_regressed": by_status.get("regressed", 0),
        "current_item": current,
    }


def verification_counts(items: Sequence[ItemRow]) -> JSON:
    """metadata.verification, and the report's: how strong the checks were."""
    results = [(i.status, precheck_result(i)) for i in items]
    return {
        "failed_before_passed_after": sum(
            1 for status, r in results if status == "done" and r == "fails_before"
        ),
        "weak": sum(1 for _, r in results if r == "weak"),
        "precheck_skipped": sum(1 for _, r in results if r == "skipped"),
        "not_prechecked": sum(1 for _, r in results if r is None),
        "regressed": sum(1 for i in items if regressed(i)),
        "reopened": sum(1 for i in items if reopenings(i)),
    }


def plan_summary(items: Sequence[ItemRow]) -> JSON:
    """What the task's metadata says of its plan, stored with every change of its items."""
    return {"progress": progress_counts(items), "verification": verification_counts(items)}


@dataclasses.dataclass(frozen=True)
class ItemsAfter:
    """A step's items once it is recorded: the rows it changes, the rows it adds, all of
    them in plan order, and the summary of the lot (None: no item changes)."""

    changed: list[ItemRow]
    added: list[ItemRow]
    items: list[ItemRow]
    summary: JSON | None


def items_after(
    before: Sequence[ItemRow],
    changes: Sequence[ItemChange],
    new: Sequence[NewItem],
    first_position: int,
) -> ItemsAfter:
    """The step's change applied to the items as it read them."""
    by_id = {i.item_id: i for i in before}
    rows: dict[str, ItemRow] = {}
    for change in changes:
        was = rows.get(change.item_id) or by_id.get(change.item_id)
        if was is None:
            raise KeyError(
                f"item {change.item_id!r} changed by a step that did not read it; a step "
                "records its changes against the items its view read"
            )
        rows[change.item_id] = changed(was, change)
    added = [fresh(first_position + n, i) for n, i in enumerate(new)]
    if not rows and not added:
        return ItemsAfter([], [], list(before), None)
    items = [rows.get(i.item_id, i) for i in before] + added
    items.sort(key=lambda i: i.position)
    return ItemsAfter(list(rows.values()), added, items, plan_summary(items))
