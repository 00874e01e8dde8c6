"""ListTasks' pages of keys, kept by the read cache (`PostgresTaskStore.list_tasks`): a
caller listing tasks that do not change lists them without reading the keys again, and
any task's NOTIFY (another process's write) makes the next listing read them again, on a
real LISTEN connection and a real pool."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from persistence.cache import TaskReadCache
from persistence.db import Pool
from persistence.notify import TaskNotifier
from persistence.records import TaskPage
from persistence.tasks import PostgresTaskStore
from tests.persistence.rows import new_task
from tests.persistence.test_notifier import notify, until

CACHE = TaskReadCache()


@pytest.fixture
async def cached(pool: Pool, database_url: str) -> AsyncIterator[PostgresTaskStore]:
    CACHE.reset(enabled=False)
    notifier = TaskNotifier(database_url, CACHE)
    await notifier.start()
    await until(lambda: CACHE.enabled, "the listener to connect")
    yield PostgresTaskStore(pool, CACHE)
    await notifier.stop()


async def heard(before: tuple[int, int]) -> None:
    """Until the listener has heard a NOTIFY since `before` (a page token)."""
    await until(lambda: CACHE.page_token() != before, "the NOTIFY to be heard")


async def listed(store: PostgresTaskStore, state: str | None = None) -> TaskPage:
    return await store.list_tasks(
        "o", context_id=None, state=state, after=None, page_size=10, cursor=None
    )


async def test_a_page_is_listed_from_memory_until_a_task_changes(
    cached: PostgresTaskStore, pool: Pool, database_url: str
) -> None:
    elsewhere = PostgresTaskStore(pool)  # another process's store: no cache of ours
    before = CACHE.page_token()
    first = (await elsewhere.create_task(new_task())).row.task_id
    await heard(before)
    page = await listed(cached, "submitted")
    assert [t.task_id for t in page.tasks] == [first] and page.total == 1
    # A change no NOTIFY told of (only a test can make one) is not seen: the page is kept.
    async with pool.connection() as conn:
        await conn.execute("UPDATE tasks SET state = 'failed' WHERE id = %s", (first,))
    assert [t.task_id for t in (await listed(cached, "submitted")).tasks] == [first]
    # Any task's NOTIFY, another's included, and the keys are read again.
    before = CACHE.page_token()
    await notify(database_url, "some-other-task")
    await heard(before)
    assert (await listed(cached, "submitted")).tasks == []
    # A task made elsewhere shows at the next listing after its NOTIFY.
    before = CACHE.page_token()
    second = (await elsewhere.create_task(new_task())).row.task_id
    await heard(before)
    page = await listed(cached, "submitted")
    assert [t.task_id for t in page.tasks] == [second] and page.total == 1


async def test_a_task_made_through_the_store_shows_at_once(cached: PostgresTaskStore) -> None:
    assert (await listed(cached)).tasks == []
    made = (await cached.create_task(new_task())).row.task_id
    # Its own write drops the pages at once, before its NOTIFY comes back.
    assert [t.task_id for t in (await listed(cached)).tasks] == [made]
