"""metadata.verification (counted in SQL by `apply_task_change()`) and the report's
`verification` (counted in Python by `harness.kernel.report.verification_counts`) agree on
the same rows: seeded random items, with histories shaped as the harness writes them (at most
one pre-check entry, attempt 0, first; attempts; re-verifications; reopenings), stored, then
read back both ways."""

from __future__ import annotations

import random

from a2a_agent.harness.kernel.report import verification_counts
from persistence.changes import TaskChange
from persistence.db import Pool, transaction
from persistence.records import JSON
from persistence.runs import PostgresRunStore
from persistence.safe import jsonb
from tests.persistence.rows import made, task
from tests.persistence.test_task_change import change

STATUSES = ("pending", "in_progress", "done", "failed", "skipped", "regressed", "interrupted")


def history(rng: random.Random) -> list[JSON]:
    entries: list[JSON] = []
    if rng.random() < 0.75:
        result = rng.choice(("fails_before", "weak", "skipped"))
        entries.append({"attempt": 0, "precheck": {"result": result, "exit_code": 1}})
    for attempt in range(1, rng.randint(0, 3) + 1):
        entry: JSON = {"attempt": attempt, "outcome": rng.choice(("retry", "done"))}
        if rng.random() < 0.4:
            entry["reverify"] = [
                {"result": rng.choice(("passed", "regressed")), "round": f"r{n}"}
                for n in range(rng.randint(1, 2))
            ]
        if rng.random() < 0.2:
            entry["reopened"] = {"by": "r1"}
        entries.append(entry)
    return entries


async def test_sql_and_python_count_the_same_checks(pool: Pool) -> None:
    rng = random.Random(20261203)
    runs = PostgresRunStore(pool)
    seen: set[str] = set()
    for _ in range(15):
        task_id = await made(pool, items=8)
        async with transaction(pool) as conn:
            for n in range(8):
                await conn.execute(
                    "UPDATE items SET status = %s, history = %s "
                    "WHERE task_id = %s AND item_id = %s",
                    (rng.choice(STATUSES), jsonb(history(rng)), task_id, f"i{n}"),
                )
        await change(pool, task_id, TaskChange(items_changed=True))
        in_sql = (await task(pool, task_id))["metadata"]["verification"]
        items = (await runs.view(task_id)).items
        assert in_sql == verification_counts(items), [i.history for i in items]
        seen |= {name for name, count in in_sql.items() if count}
    assert seen == set(in_sql), f"never counted: {set(in_sql) - seen}"  # the seed reaches all
