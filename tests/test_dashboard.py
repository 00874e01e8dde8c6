"""The dashboard in headless Chromium (Debian's, driven by Playwright): the login refuses a
wrong key, the list shows a running task, the task page follows the run without a reload,
and approving a pending request from it resumes the run (issue 15, part 1).

The task page's screenshot is written under the test's tmp_path; with
A2A_AGENT_UPDATE_SCREENSHOT=1 it is also copied to docs/dashboard.png (the README's), so a
test run leaves the checkout as it was."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser

from tests.support.a2a import a2a_client, item, send, wait_for
from tests.support.db import rows
from tests.support.processes import REPO, StartAgent
from tests.test_auth import make_key
from tests.test_pauses import plan_with
from tests.test_ui_support import chromium, log_in

SCREENSHOT = REPO / "docs" / "dashboard.png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def test_the_login_refuses_a_wrong_key(start_agent: StartAgent, browser: Browser) -> None:
    server = start_agent("serve", "ui-1", A2A_AGENT_INSECURE_OPEN="0")
    reader = make_key(server, "reader", "read")
    operator = make_key(server, "ops", "read", "operator")
    page = await browser.new_page()
    await log_in(page, server, "a2a_000000000000_wrong")
    await page.wait_for_selector("#error:has-text('not valid')")
    assert page.url.endswith("/ui/login")
    await page.fill("#key", reader)
    await page.click("#submit")
    await page.wait_for_selector("#error:has-text('operator')")
    await page.fill("#key", operator)
    await page.click("#submit")
    await page.wait_for_url(f"{server.url}/ui")
    assert await page.is_visible("#task-table")


def keep_screenshot(shot: Path) -> None:
    """docs/dashboard.png from this run, only when asked (A2A_AGENT_UPDATE_SCREENSHOT=1)."""
    if os.environ.get("A2A_AGENT_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, SCREENSHOT)


async def test_the_page_follows_the_run_and_approve_resumes_it(
    start_agent: StartAgent, browser: Browser, database_url: str, tmp_path: Path
) -> None:
    server = start_agent("serve", "ui-2", A2A_AGENT_INSECURE_OPEN="0")
    dev = make_key(server, "dev", "read", "submit", "run", "approve")
    operator = make_key(server, "ops", "read", "operator")
    items = [
        item("build", "sleep 1.5; echo b > build.txt", "test -f build.txt"),
        item("test", "sleep 1.5; echo t > test.txt", "test -f test.txt"),
        item("docs", "sleep 1.5; echo d > docs.txt", "test -f docs.txt"),
        item("release", "echo r > release.txt", "test -f release.txt", irreversible=True),
    ]
    async with a2a_client(server.url, key=dev) as client:
        task = await send(client, plan_with(items, goal="Ship the service"))
        page = await browser.new_page(viewport={"width": 1360, "height": 1000})
        await log_in(page, server, operator)
        await page.wait_for_url(f"{server.url}/ui")
        # The list shows the running task.
        await page.wait_for_selector(f"tr[data-task='{task.id}'][data-state='working']")
        await page.click(f"tr[data-task='{task.id}'] a")
        await page.wait_for_url(f"{server.url}/ui/tasks/{task.id}")
        await page.evaluate("window.stayed = true")  # gone if the page reloads
        # Items turn done as the run goes on, without a reload.
        for name in ("build", "test", "docs"):
            await page.wait_for_selector(
                f"tr[data-item='{name}'][data-status='done']", timeout=30_000
            )
        await page.wait_for_selector("#request button[data-option='approve']", timeout=30_000)
        assert await page.evaluate("window.stayed") is True
        shot = tmp_path / "dashboard.png"
        await page.screenshot(path=str(shot), full_page=True)
        await page.fill("#note", "released by ops")
        await page.click("#request button[data-option='approve']")
        await page.wait_for_selector("#task-state:has-text('completed')", timeout=30_000)
        assert await page.evaluate("window.stayed") is True
        done = await wait_for(client, task.id, timeout=30)
    assert done.status.state == 3  # TASK_STATE_COMPLETED
    # The approval went the way of an A2A reply, recorded with the person who gave it.
    (decided,) = rows(
        database_url,
        "SELECT decision, decided_by, note FROM pauses WHERE task_id = %s",
        task.id,
    )
    assert decided == ("approve", "ops", "released by ops")
    # A real PNG of the task page (with the request waiting), kept in docs/ only when asked.
    image = shot.read_bytes()
    assert image.startswith(PNG_SIGNATURE) and len(image) > 10_000
    width = int.from_bytes(image[16:20], "big")
    assert width == 1360  # the page's viewport: a full-page shot of it
    keep_screenshot(shot)
