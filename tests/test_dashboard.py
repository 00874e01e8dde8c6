"""The dashboard in headless Chromium (Debian's, driven by Playwright): the login refuses a
wrong key, the list shows a running task, the task page follows the run without a reload,
and approving a pending request from it resumes the run (issue 15, part 1)."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright

from tests.support.a2a import a2a_client, item, send, wait_for
from tests.support.processes import REPO, AgentProcess, StartAgent
from tests.test_auth import make_key
from tests.test_pauses import plan_with, rows

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOT = REPO / "docs" / "dashboard.png"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=FLAGS
        )
        try:
            yield launched
        finally:
            await launched.close()


async def log_in(page: Page, server: AgentProcess, key: str) -> None:
    await page.goto(f"{server.url}/ui")
    assert page.url.endswith("/ui/login")
    await page.fill("#key", key)
    await page.click("#submit")


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


async def test_the_page_follows_the_run_and_approve_resumes_it(
    start_agent: StartAgent, browser: Browser, database_url: str
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
        await page.screenshot(path=str(SCREENSHOT), full_page=True)
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
    assert Path(SCREENSHOT).stat().st_size > 10_000
