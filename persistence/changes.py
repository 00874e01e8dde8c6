"""Writes shared by the store's transactions: items, transitions, status, events, charges.

Each function only issues statements, so callers may run them inside a pipeline.
"""

from __future__ import annotations

from collections.abc import Sequence

from persistence.db import Conn
from persistence.records import JSON, Charge, NewItem, Transition
from persistence.safe import jsonb, safe_optional, safe_text
from persistence.sql import q


async def charge_step(conn: Conn, task_id: str, key: str, charge: Charge) -> None:
    """Write a step's charge once (replacing its reservation) and refresh metadata.budget."""
    await conn.execute(
        q("record_charge"),
        {
            "key": key,
            "task_id": task_id,
            "kind": charge.kind,
            "tool": charge.tool,
            "tokens": charge.tokens,
            "usd": charge.usd,
            "actions": charge.actions,
        },
        prepare=True,
    )
    await conn.execute(q("refresh_budget"), {"task_id": task_id}, prepare=True)


async def insert_items(conn: Conn, task_id: str, items: Sequence[NewItem]) -> None:
    for position, item in enumerate(items):
        await conn.execute(
            q("insert_item"),
            {
                "task_id": task_id,
                "position": position,
                "item_id": item.item_id,
                "title": item.title,
                "run": item.run,
                "verify_command": item.verify_command,
                "verify_timeout_s": item.verify_timeout_s,
                "max_attempts": item.max_attempts,
            },
            prepare=True,
        )


async def apply_change(
    conn: Conn,
    task_id: str,
    *,
    transitions: Sequence[Transition],
    task_state: str | None,
    status_text: str | None,
    seq: int,
    event_seq: int,
    items_changed: bool,
    report: JSON | None = None,
) -> None:
    """Write transitions, the task's new status, its derived summary, its events, and the
    NOTIFY that wakes streams and drops cached rows. `seq`/`event_seq` are the task's
    counters as locked; each is advanced by what is written, so there is never a gap."""
    first_event_seq = event_seq
    for t in transitions:
        seq += 1
        await conn.execute(
            q("insert_transition"),
            {
                "task_id": task_id,
                "seq": seq,
                "item_id": t.item_id,
                "attempt": t.attempt,
                "from_state": t.from_state,
                "to_state": t.to_state,
                "reason": safe_text(t.reason),
                "at": t.at,
            },
            prepare=True,
        )
    if task_state is not None:
        await conn.execute(
            q("update_task_state"),
            {
                "task_id": task_id,
                "state": task_state,
                "status_text": safe_optional(status_text),
                "transition_seq": seq,
            },
            prepare=True,
        )
    elif transitions:
        await conn.execute(
            q("set_transition_seq"), {"task_id": task_id, "transition_seq": seq}, prepare=True
        )
    if report is not None:
        await conn.execute(q("set_report"), {"task_id": task_id, "report": jsonb(report)})
    if items_changed:
        await conn.execute(q("refresh_summary"), {"task_id": task_id}, prepare=True)
        event_seq += 1
        await conn.execute(
            q("insert_artifact_event"),
            {"task_id": task_id, "seq": event_seq, "name": "plan"},
            prepare=True,
        )
    if report is not None:
        event_seq += 1
        await conn.execute(
            q("insert_artifact_event"), {"task_id": task_id, "seq": event_seq, "name": "report"}
        )
    if task_state is not None:
        event_seq += 1
        await conn.execute(
            q("insert_status_event"), {"task_id": task_id, "seq": event_seq}, prepare=True
        )
    if event_seq != first_event_seq:
        await conn.execute(
            q("set_event_seq"), {"task_id": task_id, "event_seq": event_seq}, prepare=True
        )
    await conn.execute(q("notify_task"), {"task_id": task_id}, prepare=True)
