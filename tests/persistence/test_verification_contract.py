"""metadata.verification and metadata.progress say what the stored rows say: counted once
(`persistence.views`), from the items as a step leaves them, and stored with its record.
Seeded random items, with histories shaped as the harness writes them (at most one pre-check
entry, attempt 0, first; attempts; re-verifications; reopenings), recorded a step at a time
as the harness records them, then counted again from the rows read back."""

from __future__ import annotations

import random

from persistence.db import Pool
from persistence.records import JSON, ItemChange, StepRecord
from persistence.runs import PostgresRunStore
from persistence.views import progress_counts, verification_counts
from tests.persistence.rows import made, recorded, task

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


async def test_the_stored_counts_are_the_counts_of_the_stored_rows(pool: Pool) -> None:
    rng = random.Random(20261203)
    runs = PostgresRunStore(pool)
    seen: set[str] = set()
    for _ in range(15):
        task_id = await made(pool, items=8)
        for n in rng.sample(range(8), 5):  # a step per item, some left as planned
            change = ItemChange(f"i{n}", rng.choice(STATUSES), 1, history=history(rng))
            step = StepRecord(effect_key=f"{task_id}:{n}", step="s", result={}, item=change)
            await recorded(runs, task_id, step)
        metadata = (await task(pool, task_id))["metadata"]
        items = (await runs.view(task_id)).items
        assert metadata["verification"] == verification_counts(items), [i.history for i in items]
        assert metadata["progress"] == progress_counts(items)
        seen |= {name for name, count in metadata["verification"].items() if count}
    assert seen == set(metadata["verification"]), "some count was never reached by the seed"
