"""The items a worker keeps between a task's steps, so that a step's view does not read (and
decode) every item, with every attempt's history, when only its own run wrote them since.

Each write of a task's items counts one in `tasks.items_rev` (functions.sql,
apply_task_change). The items kept at a count are the rows as they stand at it: those read at
it, or those a record worked out from the rows it was given when its write made that count
(and those rows were the ones kept at the count before). Anything else is dropped, and the
next view reads the rows.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence

from persistence.records import ItemRow

KEPT_TASKS = 1000  # a worker's runs at once are far fewer; the oldest go first


def with_clocks(items: Sequence[ItemRow], clocks: Mapping[str, float]) -> list[ItemRow]:
    """The items with the time their first attempts began as read now (`elapsed_s`): it moves
    while nothing is written, and only an item with a time limit of its own reads it."""
    if not clocks:
        return list(items)
    return [
        dataclasses.replace(i, elapsed_s=clocks[i.item_id]) if i.item_id in clocks else i
        for i in items
    ]


class KeptItems:
    def __init__(self, limit: int = KEPT_TASKS) -> None:
        self._limit = limit
        self._by_task: OrderedDict[str, tuple[int, list[ItemRow]]] = OrderedDict()

    def get(self, task_id: str) -> tuple[int, list[ItemRow]] | None:
        """The count the task's items are kept at, and the rows; None: none are kept."""
        return self._by_task.get(task_id)

    def read(self, task_id: str, rev: int, items: list[ItemRow]) -> None:
        """The rows as a view read them at `rev`."""
        self._by_task[task_id] = (rev, list(items))
        self._by_task.move_to_end(task_id)
        while len(self._by_task) > self._limit:
            self._by_task.popitem(last=False)

    def recorded(
        self, task_id: str, rev: int | None, given: Sequence[ItemRow], after: list[ItemRow]
    ) -> None:
        """A record wrote the items (`rev`: the count its write made; None: it wrote none),
        working out `after` from the rows it was `given`."""
        if rev is None:
            return
        kept = self._by_task.get(task_id)
        if (
            kept is not None
            and kept[0] == rev - 1
            and len(kept[1]) == len(given)
            and all(k.same_row(g) for k, g in zip(kept[1], given, strict=True))
        ):
            self.read(task_id, rev, after)
        else:
            self.drop(task_id)

    def drop(self, task_id: str) -> None:
        self._by_task.pop(task_id, None)
