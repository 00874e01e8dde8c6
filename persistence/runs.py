"""The run's side of the store: what a step reads as it starts, and how it is recorded.

A checkpointed step reads once (`view`: one round trip) and writes once (`record_step`: one
statement, so one round trip with its commit), and gets back what it needs to render
plan.json and progress.md without reading again.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from persistence.cache import TaskReadCache
from persistence.db import Pool, read
from persistence.errors import NotFound, StoreError
from persistence.kept import KeptItems, with_clocks
from persistence.records import (
    JSON,
    Checkpoint,
    Decision,
    Delegation,
    EffectRow,
    Fact,
    InputFile,
    ItemChange,
    ItemRow,
    NewItem,
    OutputFile,
    StepOutcome,
    StepRecord,
    StepView,
    TransitionRow,
)
from persistence.safe import jsonb, safe_value
from persistence.sql import q
from persistence.steps import check_kept, keep_params, waiting_keep
from persistence.views import ItemsAfter, items_after, row_json


class RunStore(Protocol):
    """What the harness needs from storage."""

    async def view(
        self, task_id: str, *, effect_key: str | None = None, budget: bool = False
    ) -> StepView: ...
    async def record_step(
        self, task_id: str, record: StepRecord, items: Sequence[ItemRow]
    ) -> StepOutcome: ...
    async def transitions(self, task_id: str) -> list[TransitionRow]: ...
    async def checkpoints(self, task_id: str) -> list[Checkpoint]: ...
    async def state_of(self, task_id: str) -> str | None: ...
    async def run_counts(self, task_id: str) -> JSON: ...
    async def notes(self, task_id: str) -> list[Note]: ...
    async def input_files(self, task_id: str) -> list[InputFile]: ...
    async def trace_context(self, task_id: str) -> str | None: ...


@dataclass(frozen=True)
class Note:
    seq: int
    text: str
    at: datetime


def _item(row: dict[str, Any]) -> ItemRow:
    return ItemRow(**row)


def _transition(data: dict[str, Any]) -> TransitionRow:
    return TransitionRow(**{**data, "at": datetime.fromisoformat(data["at"])})


def output_json(output: OutputFile) -> JSON:
    return {
        "name": output.name,
        "media_type": output.media_type,
        "filename": output.filename,
        "size": len(output.body),
        "sha256": hashlib.sha256(output.body).hexdigest(),
        "body": base64.b64encode(output.body).decode(),
    }


# How a StepRecord travels to `record_step()` (functions.sql), which reads it as `p_step`.
# Every field travels under its own name, as `_plain` makes it, except those listed here;
# tests/persistence/test_step_contract.py checks these keys against what the SQL reads.
#: Fields that travel under another key (the SQL's name for them).
STEP_RENAMES: dict[str, str] = {
    "checkpoint": "checkpoint_sha",  # its bundle travels apart, as bytea
    "item_id": "effect_item_id",
    "attempt": "effect_attempt",
}
#: Fields whose value is made otherwise than by `_plain`, from the record and its items once
#: it is recorded (an item travels whole, as views.py worked it out, with its view).
STEP_CONVERTERS: dict[str, Callable[[StepRecord, ItemsAfter], Any]] = {
    "checkpoint": lambda r, _: r.checkpoint.sha if r.checkpoint else None,
    # The effect's item and attempt: the step's item when not given apart.
    "item_id": lambda r, _: r.effect_item_id,
    "attempt": lambda r, _: r.effect_attempt,
    "item": lambda r, a: _changed_json(a, r.item.item_id) if r.item else None,
    "more_items": lambda r, a: [_changed_json(a, c.item_id) for c in r.more_items],
    "new_items": lambda r, a: [row_json(i) for i in a.added],
    "outputs": lambda r, _: [output_json(o) for o in r.outputs],
}
#: Fields that travel inside another key rather than as one of their own.
STEP_FOLDED: dict[str, str] = {"first_position": "new_items"}  # the new items' positions
#: Keys made from no field: the plan's summary once the step is recorded (views.py).
STEP_ADDED: dict[str, Callable[[StepRecord, ItemsAfter], Any]] = {
    "summary": lambda _, a: a.summary,
}
# A changed item's columns that a step may change (the rest are fixed when it is planned).
_CHANGEABLE = (
    "item_id", "title", "run", "verify_command", "verify_timeout_s", "run_timeout_s",
    "max_attempts", "status", "attempts", "evidence", "commit_sha", "failures", "history",
    "view",
)  # fmt: skip


def _changed_json(after: ItemsAfter, item_id: str) -> JSON:
    row = row_json(next(i for i in after.changed if i.item_id == item_id))
    return {k: row[k] for k in _CHANGEABLE}


def _plain(value: Any) -> Any:
    """A value as JSON: a dataclass field by field, a list item by item, a datetime in ISO
    8601; a JSON value as it is. Bytes have no JSON form: such a field needs a converter."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        raise TypeError("bytes have no JSON form: give the field a converter in STEP_CONVERTERS")
    return value


def recorded_items(record: StepRecord, items: Sequence[ItemRow]) -> ItemsAfter:
    """The step's items once it is recorded, from the items as it read them; their text as
    the database keeps it (`safe_value`: a NUL shown as a symbol)."""
    changes = [record.item] if record.item else []
    return items_after(
        items,
        [ItemChange(**_storable_fields(c)) for c in [*changes, *record.more_items]],
        [NewItem(**_storable_fields(i)) for i in record.new_items],
        record.first_position,
    )


def _storable_fields(value: ItemChange | NewItem) -> dict[str, Any]:
    """A change's or new item's fields made storable. `safe_value` builds every dict and list
    anew, so the fields are not copied first (`dataclasses.asdict` did, a deep copy of the
    item's whole history on every step)."""
    return {f.name: safe_value(getattr(value, f.name)) for f in dataclasses.fields(value)}


def step_json(record: StepRecord, after: ItemsAfter) -> JSON:
    """A StepRecord as `record_step()` takes it, made from the dataclass's fields, so no field
    can be left out (the bundle travels apart, as bytea)."""
    data: JSON = {}
    for f in dataclasses.fields(record):
        if f.name in STEP_FOLDED:
            continue
        convert = STEP_CONVERTERS.get(f.name)
        value = convert(record, after) if convert else _plain(getattr(record, f.name))
        data[STEP_RENAMES.get(f.name, f.name)] = value
    for key, make in STEP_ADDED.items():
        data[key] = make(record, after)
    return data


class PostgresRunStore:
    def __init__(self, pool: Pool, cache: TaskReadCache | None = None) -> None:
        self._pool = pool
        self._cache = cache
        self._kept = KeptItems()

    async def view(
        self, task_id: str, *, effect_key: str | None = None, budget: bool = False
    ) -> StepView:
        """The task, its items, the step's effect and (when asked) the budget: one statement.
        The items are read only when a write since this process last had them (`KeptItems`)."""
        # Taken before the read: a record of this task in this process meanwhile replaces it.
        kept = self._kept.get(task_id)
        rev = kept[0] if kept is not None else None
        # The segment's last step result, kept by this statement (steps.WaitingKeep).
        waiting = waiting_keep()
        step = waiting.take() if waiting is not None else None
        keep = keep_params(waiting.ref if waiting is not None else None, step)
        asked_at = time.monotonic()
        try:
            async with read(self._pool) as conn:
                cur = await conn.execute(
                    q("step_view"),
                    {"task_id": task_id, "key": effect_key, "budget": budget, "items_rev": rev}
                    | keep,
                    prepare=True,
                )
                row = await cur.fetchone()
        except BaseException:
            if waiting is not None and step is not None:
                waiting.put_back(step)  # not known to be kept: kept again, later
            raise
        if waiting is not None and step is not None:
            try:
                check_kept(row, waiting.ref, step, prefix="kept_")
            except StoreError:
                # Refused (a takeover, a cancel): waiting again, so whatever the step does
                # next (its failure kept, an effect, a record) meets the refusal too.
                waiting.put_back(step)
                raise
        if row is None or row["state"] is None:
            self._kept.drop(task_id)
            raise NotFound(task_id)
        if row["items"] is not None:
            items = [_item(i) for i in row["items"]]
            self._kept.read(task_id, row["items_rev"], items)
        else:
            assert kept is not None  # no items come back only at the count kept
            items = with_clocks(kept[1], row["item_clocks"] or {})
        effect = row["effect"]
        return StepView(
            task_id=task_id,
            state=row["state"],
            goal=row["goal"],
            items=items,
            fingerprint=row["workspace_fingerprint"],
            checkpoint_sha=row["checkpoint_sha"],
            effect=EffectRow(**effect) if effect else None,
            budget=dict(row["budget"]) if row["budget"] else None,
            closed=row["closed"],
            transition_seq=row["transition_seq"],
            segment=row["segment"],
            policy=dict(row["policy"]),
            decisions={
                pause_id: Decision(id=pause_id, **decided)
                for pause_id, decided in (row["decisions"] or {}).items()
            },
            facts=[Fact(**f) for f in row["facts"] or []],
            seed=row["seed"],
            base_sha=row["base_sha"],
            owner=row["owner"],
            delegations={d["id"]: Delegation(**d) for d in row["delegations"] or []},
            asked_at=asked_at,
        )

    async def record_step(
        self, task_id: str, record: StepRecord, items: Sequence[ItemRow]
    ) -> StepOutcome:
        """Write the step in one transaction, in one statement: `record_step()` (functions.sql)
        locks the task and writes everything the step changed. A step already recorded under
        its key writes nothing again and gets the recorded result back. `items`: the task's
        items as the step read them (its view's), which its item changes apply to."""
        after = recorded_items(record, items)
        async with read(self._pool) as conn:  # autocommit: the statement is the transaction
            cur = await conn.execute(
                q("record_step"),
                {
                    "task_id": task_id,
                    "step": jsonb(step_json(record, after)),
                    "bundle": record.checkpoint.bundle if record.checkpoint else None,
                },
                prepare=True,
            )
            row = await cur.fetchone()
        recorded = row["recorded"] if row else None
        if recorded is None:
            raise NotFound(task_id)
        if self._cache is not None and not recorded["replayed"]:
            self._cache.invalidate(task_id)
        if recorded["replayed"]:
            self._kept.drop(task_id)
            return StepOutcome(
                result=recorded["result"] or {},
                replayed=True,
                task_state=recorded["state"],
                items=[_item(i) for i in recorded.get("items") or []],
            )
        self._kept.recorded(task_id, recorded.get("items_rev"), items, after.items)
        return StepOutcome(
            result=recorded["result"] or {},
            replayed=False,
            task_state=recorded["state"],
            items=after.items if after.summary is not None else [],
            changed_items=after.changed,
            transitions=[_transition(t) for t in recorded.get("transitions") or []],
        )

    async def transitions(self, task_id: str) -> list[TransitionRow]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("get_transitions"), {"task_id": task_id}, prepare=True)
            return [TransitionRow(**r) for r in await cur.fetchall()]

    async def checkpoints(self, task_id: str) -> list[Checkpoint]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("get_checkpoints"), {"task_id": task_id})
            return [
                Checkpoint(sha=r["sha"], bundle=bytes(r["bundle"])) for r in await cur.fetchall()
            ]

    async def trace_context(self, task_id: str) -> str | None:
        """The task's W3C traceparent: the span every step of it descends from."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("trace_context"), {"task_id": task_id}, prepare=True)
            row = await cur.fetchone()
        return row["trace_context"] if row else None

    async def state_of(self, task_id: str) -> str | None:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("task_state"), {"task_id": task_id}, prepare=True)
            row = await cur.fetchone()
        return str(row["state"]) if row else None

    async def notes(self, task_id: str) -> list[Note]:
        """The caller's steering notes, in order."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("notes_after"), {"task_id": task_id, "after": 0})
            return [Note(r["seq"], r["text"], r["at"]) for r in await cur.fetchall()]

    async def input_files(self, task_id: str) -> list[InputFile]:
        """The files the task's first message carried (or pointed to), in order."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("input_files"), {"task_id": task_id})
            return [
                InputFile(
                    name=r["name"],
                    media_type=r["media_type"],
                    filename=r["filename"],
                    size=int(r["size"]),
                    sha256=r["sha256"],
                    body=bytes(r["body"]) if r["body"] is not None else None,
                    url=r["url"],
                )
                for r in await cur.fetchall()
            ]

    async def run_counts(self, task_id: str) -> JSON:
        """Effects that ran again after a crash (and how many extra runs), restored workspaces."""
        async with read(self._pool) as conn:
            cur = await conn.execute(q("run_counts"), {"task_id": task_id})
            row = await cur.fetchone()
        return dict(row) if row else {"reruns": 0, "steps_rerun": 0, "restored": 0}
