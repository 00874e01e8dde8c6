"""The effects ledger: every keyed effect (command, tool call, model call) and its result."""

from __future__ import annotations

from typing import Any, Protocol

from psycopg.types.json import Jsonb

from persistence.changes import charge_step
from persistence.db import Pool, transaction
from persistence.records import JSON, Charge, EffectRow, ModelCall
from persistence.sql import q


def _effect(row: dict[str, Any]) -> EffectRow:
    return EffectRow(key=row["key"], status=row["status"], runs=row["runs"], result=row["result"])


class Ledger(Protocol):
    async def start_effect(
        self,
        key: str,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        *,
        reserve: Charge | None = None,
    ) -> EffectRow: ...
    async def get_effect(self, key: str) -> EffectRow | None: ...
    async def complete_effect(
        self,
        key: str,
        *,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        result: JSON,
        model_call: ModelCall | None = None,
        charge: Charge | None = None,
    ) -> EffectRow: ...


class PostgresLedger:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def get_effect(self, key: str) -> EffectRow | None:
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("get_effect"), {"key": key}, prepare=True)
            row = await cur.fetchone()
        return _effect(row) if row else None

    async def start_effect(
        self,
        key: str,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        *,
        reserve: Charge | None = None,
    ) -> EffectRow:
        """Record that an effect is about to run (and reserve its budget, in the same
        transaction); a completed effect is returned untouched."""
        async with transaction(self._pool) as conn:
            if reserve is not None:
                await conn.execute(
                    q("reserve_charge"),
                    {"key": key, "task_id": task_id, "tokens": reserve.tokens, "usd": reserve.usd},
                    prepare=True,
                )
            cur = await conn.execute(
                q("start_effect"),
                {
                    "key": key,
                    "task_id": task_id,
                    "item_id": item_id,
                    "attempt": attempt,
                    "step": step,
                },
                prepare=True,
            )
            row = await cur.fetchone()
            if row is None:  # the conflict clause skipped a completed effect
                cur = await conn.execute(q("get_effect"), {"key": key})
                row = await cur.fetchone()
        assert row is not None
        return _effect(row)

    async def complete_effect(
        self,
        key: str,
        *,
        task_id: str,
        item_id: str | None,
        attempt: int | None,
        step: str,
        result: JSON,
        model_call: ModelCall | None = None,
        charge: Charge | None = None,
    ) -> EffectRow:
        """Record the result once; a second completion returns the first one's result.

        A model call's usage row is written in the same transaction as its response.
        """
        async with transaction(self._pool) as conn:
            cur = await conn.execute(q("lock_effect"), {"key": key}, prepare=True)
            row = await cur.fetchone()
            if row is not None and row["status"] == "completed":
                return _effect(row)
            await conn.execute(
                q("complete_effect"),
                {
                    "key": key,
                    "task_id": task_id,
                    "item_id": item_id,
                    "attempt": attempt,
                    "step": step,
                    "result": Jsonb(result),
                },
                prepare=True,
            )
            if charge is not None:
                await charge_step(conn, task_id, key, charge)
            if model_call is not None:
                await conn.execute(
                    q("insert_model_call"),
                    {
                        "key": key,
                        "task_id": task_id,
                        "item_id": item_id,
                        "attempt": attempt,
                        "purpose": model_call.purpose,
                        "model": model_call.model,
                        "stop_reason": model_call.stop_reason,
                        "input_tokens": model_call.input_tokens,
                        "output_tokens": model_call.output_tokens,
                        "cache_read_tokens": model_call.cache_read_tokens,
                        "cache_write_tokens": model_call.cache_write_tokens,
                    },
                    prepare=True,
                )
        return EffectRow(key=key, status="completed", runs=row["runs"] if row else 1, result=result)
