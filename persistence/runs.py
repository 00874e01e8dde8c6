"""The run's side of the store: what a step reads as it starts, and how it is recorded.

A checkpointed step reads once (`view`) and writes once (`record_step`: one transaction, its
writes pipelined), and gets back what it needs to render plan.json and progress.md.
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from persistence.cache import TaskReadCache
from persistence.changes import apply_change, charge_step, insert_items
from persistence.db import Conn, Pool, read, transaction
from persistence.errors import NotFound
from persistence.records import (
    TERMINAL_STATES,
    Checkpoint,
    EffectRow,
    ItemRow,
    StepOutcome,
    StepRecord,
    StepView,
    TransitionRow,
)
from persistence.safe import jsonb, optional_jsonb
from persistence.sql import q


class RunStore(Protocol):
    """What the harness needs from storage."""

    async def view(
        self, task_id: str, *, effect_key: str | None = None, budget: bool = False
    ) -> StepView: ...
    async def record_step(self, task_id: str, record: StepRecord) -> StepOutcome: ...
    async def transitions(self, task_id: str) -> list[TransitionRow]: ...
    async def checkpoints(self, task_id: str) -> list[Checkpoint]: ...


def _item(row: dict[str, Any]) -> ItemRow:
    return ItemRow(**row)


class PostgresRunStore:
    def __init__(self, pool: Pool, cache: TaskReadCache | None = None) -> None:
        self._pool = pool
        self._cache = cache

    def _tx(self) -> AbstractAsyncContextManager[Conn]:
        return transaction(self._pool)

    async def view(
        self, task_id: str, *, effect_key: str | None = None, budget: bool = False
    ) -> StepView:
        async with read(self._pool) as conn:
            cur = await conn.execute(
                q("step_view"),
                {"task_id": task_id, "key": effect_key, "budget": budget},
                prepare=True,
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(task_id)
        effect = row["effect"]
        return StepView(
            task_id=task_id,
            state=row["state"],
            goal=row["goal"],
            items=[_item(i) for i in row["items"]],
            fingerprint=row["workspace_fingerprint"],
            checkpoint_sha=row["checkpoint_sha"],
            effect=EffectRow(**effect) if effect else None,
            budget=dict(row["budget"]) if row["budget"] else None,
        )

    async def record_step(self, task_id: str, record: StepRecord) -> StepOutcome:
        async with self._tx() as conn:
            cur = await conn.execute(
                q("lock_step"), {"task_id": task_id, "key": record.effect_key}, prepare=True
            )
            locked = await cur.fetchone()
            if locked is None:
                raise NotFound(task_id)
            if locked["effect_status"] == "completed":
                return StepOutcome(
                    result=locked["effect_result"],
                    replayed=True,
                    task_state=locked["state"],
                    items=await self._items(conn, task_id),
                )
            async with conn.pipeline():
                if record.charge is not None:
                    await charge_step(conn, task_id, record.effect_key, record.charge)
                terminal = locked["state"] in TERMINAL_STATES
                if terminal:
                    # Canceled (or stopped) while the step ran: keep the evidence and the
                    # charge, change nothing else.
                    await self._complete_effect(conn, task_id, record)
                    await conn.execute(q("notify_task"), {"task_id": task_id}, prepare=True)
                else:
                    await self._apply(conn, task_id, record, locked)
                items = await conn.execute(q("get_items"), {"task_id": task_id}, prepare=True)
                written = await conn.execute(
                    q("transitions_after"),
                    {"task_id": task_id, "after": locked["transition_seq"]},
                    prepare=True,
                )
                item_rows = [_item(r) for r in await items.fetchall()]
                transitions = [TransitionRow(**r) for r in await written.fetchall()]
        if self._cache is not None:
            self._cache.invalidate(task_id)
        return StepOutcome(
            result=record.result,
            replayed=False,
            task_state=locked["state"] if terminal else (record.task_state or locked["state"]),
            items=item_rows,
            transitions=transitions,
        )

    async def _apply(
        self, conn: Conn, task_id: str, record: StepRecord, locked: dict[str, Any]
    ) -> None:
        await insert_items(conn, task_id, record.new_items)
        if record.item is not None:
            change = record.item
            await conn.execute(
                q("update_item"),
                {
                    "task_id": task_id,
                    "item_id": change.item_id,
                    "status": change.status,
                    "attempts": change.attempts,
                    "evidence": optional_jsonb(change.evidence),
                    "commit_sha": change.commit_sha,
                    "failures": change.failures,
                },
                prepare=True,
            )
        if record.metadata_patch:
            await conn.execute(
                q("merge_metadata"),
                {"task_id": task_id, "patch": jsonb(record.metadata_patch)},
            )
        if record.fingerprint is not None:
            await conn.execute(
                q("set_fingerprint"),
                {"task_id": task_id, "fingerprint": record.fingerprint},
                prepare=True,
            )
        if record.checkpoint is not None:
            params = {"task_id": task_id, "sha": record.checkpoint.sha}
            await conn.execute(q("add_checkpoint"), {**params, "bundle": record.checkpoint.bundle})
            await conn.execute(q("set_checkpoint_sha"), params)
        if record.model_call is not None:
            call = record.model_call
            await conn.execute(
                q("insert_model_call"),
                {
                    "key": record.effect_key,
                    "task_id": task_id,
                    "item_id": record.effect_item_id,
                    "attempt": record.effect_attempt,
                    **dataclasses.asdict(call),
                },
                prepare=True,
            )
        # A task-level transition without a from-state starts from the state as locked.
        transitions = [
            dataclasses.replace(t, from_state=locked["state"])
            if t.item_id is None and t.from_state is None
            else t
            for t in record.transitions
        ]
        text = record.status_text if record.status_text is not None else locked["status_text"]
        await apply_change(
            conn,
            task_id,
            transitions=transitions,
            task_state=record.task_state,
            status_text=text,
            seq=locked["transition_seq"],
            event_seq=locked["event_seq"],
            items_changed=record.item is not None or bool(record.new_items),
            report=record.report,
        )
        await self._complete_effect(conn, task_id, record)
        if record.then is not None:
            then = record.then
            await conn.execute(
                q("premark_effect"),
                {
                    "key": then.key,
                    "task_id": task_id,
                    "item_id": then.item_id,
                    "attempt": then.attempt,
                    "step": then.step,
                },
                prepare=True,
            )

    async def _complete_effect(self, conn: Conn, task_id: str, record: StepRecord) -> None:
        await conn.execute(
            q("complete_effect"),
            {
                "key": record.effect_key,
                "task_id": task_id,
                "item_id": record.effect_item_id,
                "attempt": record.effect_attempt,
                "step": record.step,
                "runs": record.runs,
                "result": jsonb(record.result),
            },
            prepare=True,
        )

    async def _items(self, conn: Conn, task_id: str) -> list[ItemRow]:
        cur = await conn.execute(q("get_items"), {"task_id": task_id}, prepare=True)
        return [_item(r) for r in await cur.fetchall()]

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
