"""A task page follows its run even when a notification is missed: the live stream looks at
the task's version on its own every few seconds, so a change it was not told of (made here
with a plain UPDATE, which sends no NOTIFY, as a listener reconnecting would miss one) still
reaches the page, without a reload."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import psycopg
import pytest
from a2a.types.a2a_pb2 import TaskState
from playwright.async_api import Browser

from a2a_agent.ui.routes import LIVE_CHECK_S
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.processes import StartAgent
from tests.test_ui_support import chromium, operator_session, page

WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def sse_events(http: httpx.AsyncClient, url: str, seconds: float) -> list[str]:
    """The event names a stream sends within `seconds` (comments left out)."""
    names: list[str] = []

    async def read() -> None:
        async with http.stream("GET", url) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("event:"):
                    names.append(line.split(":", 1)[1].strip())

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(read(), seconds)
    return names


def behind_its_back(database_url: str, task_id: str, text: str) -> None:
    """A change of the task with no NOTIFY (apply_task_change always sends one)."""
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE tasks SET status_text = %s, updated_at = clock_timestamp() WHERE id = %s",
            (text, task_id),
        )


async def test_the_stream_notices_a_change_it_was_not_notified_of(
    start_agent: StartAgent,
    database_url: str,
    browser: Browser,
) -> None:
    server = start_agent("serve", "ui-live")
    async with a2a_client(server.url) as client:
        asks = plan_message([item("deploy", "true", "true", irreversible=True)])
        task = await wait_for(client, (await send(client, asks)).id, WAITING)
    live = f"{server.url}/ui/tasks/{task.id}/live"
    with operator_session(server) as http:
        shown = page(http, f"/ui/tasks/{task.id}")
    version = shown.one("div", id="task").attrs["data-version"]
    async with httpx.AsyncClient(timeout=30) as http_async:
        # A waiting task does not change: the stream says hello and nothing more...
        quiet = await sse_events(http_async, f"{live}?since={version}", 2 * LIVE_CHECK_S + 1)
        assert quiet == ["hello"]
        # ...and a page made from an older version is told at once.
        stale = await sse_events(http_async, f"{live}?since=0000", 1.0)
        assert stale == ["hello", "changed"]
        # A change nobody was notified of reaches an open stream within a tick or two.
        stream = asyncio.create_task(sse_events(http_async, live, 3 * LIVE_CHECK_S + 2))
        await asyncio.sleep(0.5)
        behind_its_back(database_url, task.id, "changed behind the stream's back")
        assert await stream == ["hello", "changed"]
    # In the browser: the open page shows it without a reload.
    view = await browser.new_page()
    await view.goto(f"{server.url}/ui/tasks/{task.id}")
    await view.evaluate("window.stayed = true")
    behind_its_back(database_url, task.id, "and again, unnotified")
    started = time.monotonic()
    await view.wait_for_selector(
        "text=and again, unnotified", timeout=(3 * LIVE_CHECK_S + 5) * 1000
    )
    assert time.monotonic() - started < 3 * LIVE_CHECK_S + 5
    assert await view.evaluate("window.stayed") is True
