"""A per-process cache of task rows for GetTask, and of ListTasks' pages of keys, kept honest
by NOTIFY.

Every write to a task sends NOTIFY with its id (in the same transaction), and every process
listens (`persistence.notify`); a notification drops the row here. While the listener is not
connected the cache is off and empty, so a missed notification can never leave a stale row.
A read that raced with a write (notification seen while the query ran) is not cached.

A page (which tasks an owner's listing holds, in order, and how many match) can change with
any task's write: a new task, a state, a status time. So every notification makes every page
stale: a caller listing tasks that do not change lists them from memory, and one listing
while runs go on reads the keys again, as it did before pages were kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, TypeVar

from persistence.records import TaskRow

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TaskReadCache:
    def __init__(self, max_rows: int = 10_000, max_pages: int = 1_000) -> None:
        self._rows: OrderedDict[str, TaskRow] = OrderedDict()
        # Each page kept; every notification empties it, so what is here is current.
        self._pages: OrderedDict[Hashable, Any] = OrderedDict()
        self._changes = 0  # notifications heard: a page read across one is not kept
        self._max_pages = max_pages
        self._gen: dict[str, int] = {}
        self._readers: dict[str, int] = {}
        self._max_rows = max_rows
        self._epoch = 0
        self.enabled = False

    def get(self, task_id: str) -> TaskRow | None:
        if not self.enabled:
            return None
        return _recent(self._rows, task_id)

    def begin_read(self, task_id: str) -> tuple[int, int]:
        self._readers[task_id] = self._readers.get(task_id, 0) + 1
        return self._epoch, self._gen.setdefault(task_id, 0)

    def end_read(self, task_id: str, token: tuple[int, int], row: TaskRow | None) -> None:
        fresh = token == (self._epoch, self._gen.get(task_id))
        if self.enabled and fresh and row is not None:
            self._rows[task_id] = row
            self._rows.move_to_end(task_id)
            while len(self._rows) > self._max_rows:
                old, _ = self._rows.popitem(last=False)
                if not self._readers.get(old):
                    self._gen.pop(old, None)
        readers = self._readers.get(task_id, 1) - 1
        if readers:
            self._readers[task_id] = readers
        else:
            self._readers.pop(task_id, None)
            if task_id not in self._rows:
                self._gen.pop(task_id, None)

    def invalidate(self, task_id: str) -> None:
        if task_id in self._gen:
            self._gen[task_id] += 1
        self._rows.pop(task_id, None)
        self._changes += 1  # every page may list it otherwise now
        self._pages.clear()

    def page(self, key: Hashable) -> Any:
        """The page kept under `key` if no task changed since it was read; else None."""
        if not self.enabled:
            return None
        return _recent(self._pages, key)

    def page_token(self) -> tuple[int, int]:
        """Taken before a page's query: `keep_page` keeps it only if nothing changed since."""
        return self._epoch, self._changes

    def keep_page(self, key: Hashable, token: tuple[int, int], page: Any) -> None:
        if self.enabled and token == (self._epoch, self._changes):
            self._pages[key] = page
            self._pages.move_to_end(key)
            while len(self._pages) > self._max_pages:
                self._pages.popitem(last=False)

    def reset(self, *, enabled: bool) -> None:
        """Forget everything (the listener (re)connected or dropped)."""
        self._epoch += 1
        self._rows.clear()
        self._pages.clear()
        self._changes += 1
        self._gen = {task_id: 0 for task_id in self._readers}
        self.enabled = enabled


def _recent(kept: OrderedDict[K, V], key: K) -> V | None:
    """What `kept` holds under `key`, marked as the most recently read (or None)."""
    found = kept.get(key)
    if found is not None:
        kept.move_to_end(key)
    return found
