"""The task page's buttons in headless Chromium: each acts as an A2A caller would (a reply, a
text note, CancelTask, a continuation), for the task's owner, and is recorded with the
person's principal; the retry of a dead push really delivers again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.client import Client
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from playwright.async_api import Browser, Page

from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.processes import AgentProcess, StartAgent
from tests.support.receiver import receiver
from tests.support.secrets import secret
from tests.test_auth import make_key
from tests.test_ui_support import chromium, log_in

WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
TASK_KEYS = ("read", "submit", "run", "approve")
PUSH = {"A2A_AGENT_PUSH_ALLOW_HOSTS": "127.0.0.1", "A2A_AGENT_PUSH_BACKOFF_S": "0.2"}


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


async def task_page(browser: Browser, server: AgentProcess, key: str, task_id: str) -> Page:
    view = await browser.new_page(viewport={"width": 1360, "height": 1000})
    view.on("dialog", lambda dialog: asyncio.ensure_future(dialog.accept()))  # confirm()
    await log_in(view, server, key)
    await view.wait_for_url(f"{server.url}/ui")
    await view.goto(f"{server.url}/ui/tasks/{task_id}")
    return view


def transitions(database_url: str, task_id: str) -> list[str]:
    return [r[0] for r in rows(database_url, "SELECT reason FROM transitions WHERE task_id = %s "
                               "ORDER BY seq", task_id)]  # fmt: skip


async def test_cancel_continue_and_reject_act_as_the_person(
    start_agent: StartAgent,
    browser: Browser,
    database_url: str,
) -> None:
    server = start_agent("serve", "ui-act", A2A_AGENT_INSECURE_OPEN="0")
    dev = make_key(server, "dev", *TASK_KEYS)
    ops = make_key(server, "ops", "read", "operator")
    slow = [item("a", "echo a > a.txt", "test -f a.txt"), item("b", "sleep 60", "true")]
    async with a2a_client(server.url, key=dev) as client:
        task = await send(client, plan_message(slow, "cancel me"))
        view = await task_page(browser, server, ops, task.id)
        await view.wait_for_selector("tr[data-item='b'][data-status='in_progress']")
        # Cancel: CancelTask for the owner; the page follows; the record names the person.
        await view.click("#cancel")
        await view.wait_for_selector("#task-state:has-text('canceled')", timeout=30_000)
        canceled = await client.get_task(GetTaskRequest(id=task.id))  # still dev's task
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        said = transitions(database_url, task.id)
        assert "canceled at the caller's request" in said  # the A2A cancel's own record
        assert "canceled from the dashboard by ops" in said
        # Continue: a new message for the owner with the old task referenced; the page goes
        # to the new task, whose first message says who sent it.
        await view.click("#continue")
        await view.wait_for_url(lambda url: "/ui/tasks/" in url and task.id not in url)
        new_id = view.url.rsplit("/", 1)[1]
        made = await client.get_task(GetTaskRequest(id=new_id))  # dev's, so dev can read it
        first = MessageToDict(made.history[0])
        assert first["referenceTaskIds"] == [task.id]
        assert first["metadata"] == {"sentBy": "ops", "via": "dashboard"}
        assert [i for i, in rows(database_url, "SELECT owner FROM tasks WHERE id = %s", new_id)] \
            == ["dev"]  # fmt: skip
        await view.wait_for_selector("tr[data-item='a']")  # the plan carried over
        await view.click("#cancel")
        await view.wait_for_selector("#task-state:has-text('canceled')", timeout=30_000)

        # Reject, with a note: a reply to the pending request, decided by the person.
        asks = plan_message([item("deploy", "true", "true", irreversible=True)], "reject me")
        waiting = await wait_for(client, (await send(client, asks)).id, WAITING)
        view = await task_page(browser, server, ops, waiting.id)
        await view.fill("#note", "not on a Friday")
        await view.click("#request button[data-option='reject']")
        await view.wait_for_selector("#task-state:has-text('failed')", timeout=30_000)
        ended = await wait_for(client, waiting.id)
    assert ended.status.state == TaskState.TASK_STATE_FAILED
    assert "reject by ops: not on a Friday" in ended.status.message.parts[0].text
    assert rows(
        database_url, "SELECT decision, decided_by, note FROM pauses WHERE task_id = %s", waiting.id
    ) == [("reject", "ops", "not on a Friday")]


async def test_a_steering_note_from_the_page_reaches_the_model(
    start_agent: StartAgent,
    browser: Browser,
    fake: FakeAnthropic,
    database_url: str,
    home: Path,
) -> None:
    # The model's command waits for the test's word (a file), so the note is sent while the
    # turn is in progress, however slow this machine is.
    waits = "touch started; for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done"
    fake.add(
        tool_reply("bash", {"command": f"{waits}; echo one > one.txt"}),
        text_reply("wrote one.txt"),
    )
    server = start_agent("serve", "ui-note", A2A_AGENT_INSECURE_OPEN="0", **model_env(fake))
    dev = make_key(server, "dev", *TASK_KEYS)
    ops = make_key(server, "ops", "read", "operator")
    items = [{"id": "one", "title": "Write one.txt", "verify": "test -f one.txt"}]
    async with a2a_client(server.url, key=dev) as client:
        task = await send(client, plan_message(items, "steer me"))
        workspace = home / "workspaces" / task.id
        view = await task_page(browser, server, ops, task.id)
        for _ in range(600):
            if (workspace / "started").exists():
                break
            await asyncio.sleep(0.05)
        await view.fill("#steer-note", "Use lowercase file names only.")
        await view.click("#send-note")
        await view.wait_for_selector("#notes:has-text('Use lowercase file names only.')")
        assert "by ops" in await view.inner_text("#notes")
        assert rows(database_url, "SELECT text FROM notes WHERE task_id = %s", task.id) == [
            ("Use lowercase file names only.",)
        ]
        (workspace / "go").touch()
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status.message
    # The same path as an A2A text to a working task: a note in the task's history (with who
    # sent it), on its timeline, and in the model's next context.
    (note,) = [m for m in done.history if m.parts and m.parts[0].text.startswith("Use lower")]
    assert MessageToDict(note.metadata) == {"sentBy": "ops", "via": "dashboard"}
    assert "note from the caller: Use lowercase file names only." in transitions(
        database_url, task.id
    )
    assert "Use lowercase file names only." in str(fake.requests[1]["messages"][-1])


# Holds the body of the page's next refresh until the test lets it go: a person types while
# the new body is still arriving.
HOLD_BODY = """
window.__held = [];
const text = Response.prototype.text;
Response.prototype.text = function () {
  if (!this.url.endsWith("/body")) return text.call(this);
  return new Promise(resolve => window.__held.push(() => resolve(text.call(this))));
};
"""


@contextlib.asynccontextmanager
async def refresh_held(
    start_agent: StartAgent, browser: Browser, name: str, marked: str
) -> AsyncIterator[tuple[Client, Task, Page]]:
    """A task waiting for a person, on its page, with the page's refresh under way and its
    new body held (`window.__held`); the element `marked` carries `data-old` until the swap."""
    server = start_agent("serve", name, A2A_AGENT_INSECURE_OPEN="0")
    dev = make_key(server, "dev", *TASK_KEYS)
    ops = make_key(server, "ops", "read", "operator")
    asks = plan_message([item("deploy", "true", "true", irreversible=True)], f"{name} me")
    async with a2a_client(server.url, key=dev) as client:
        waiting = await wait_for(client, (await send(client, asks)).id, WAITING)
        view = await task_page(browser, server, ops, waiting.id)
        await view.wait_for_selector(f"#{marked}")
        await view.add_script_tag(content=HOLD_BODY)
        # Not awaited by the page (its body is held): the function returns at once.
        await view.evaluate(
            f"() => {{ document.getElementById('{marked}').dataset.old = '1'; refresh(); }}"
        )
        await view.wait_for_function("window.__held.length === 1")  # the body is arriving
        yield client, waiting, view


async def test_text_typed_while_the_page_refreshes_is_kept(
    start_agent: StartAgent, browser: Browser
) -> None:
    async with refresh_held(start_agent, browser, "ui-typing", "request") as (_, _, view):
        await view.fill("#note", "typed mid-refresh")
        await view.evaluate("window.__held.shift()()")
        await view.wait_for_selector("#request[data-old]", state="detached")  # swapped
        assert await view.input_value("#note") == "typed mid-refresh"


async def test_typing_goes_on_into_the_same_box_across_a_refresh(
    start_agent: StartAgent, browser: Browser
) -> None:
    """A person types while the page's new body lands: the keys after the swap go on into
    the box, after what was typed before it, and a box the test (or a script) held before
    the swap is still the one on the page. The swap once replaced the box with a copy of
    its text: the focus was lost, the rest of the typing went nowhere, and a note filled in
    as the swap ran was sent empty (the steering note test failed so, under load)."""
    async with refresh_held(start_agent, browser, "ui-keys", "request") as (_, _, view):
        held = await view.query_selector("#note")
        assert held is not None
        await view.click("#note")
        await view.keyboard.type("keep the ")
        await view.evaluate("window.__held.shift()()")
        await view.wait_for_selector("#request[data-old]", state="detached")  # swapped
        await view.keyboard.type("API as it is")
        assert await view.input_value("#note") == "keep the API as it is"
        assert await held.evaluate("box => box.isConnected && box === document.activeElement")
        await held.fill("filled through the old handle")
        assert await view.input_value("#note") == "filled through the old handle"


async def test_a_click_the_page_refreshes_under_still_acts(
    start_agent: StartAgent, browser: Browser
) -> None:
    """The body swapped between a button's press and its release would make no click at
    all (the press on the old button, the release on the new): the swap waits for the
    release, and the approval goes through."""
    async with refresh_held(start_agent, browser, "ui-click", "request") as held:
        client, waiting, view = held
        box = await view.locator("#request button[data-option='approve']").bounding_box()
        assert box is not None
        await view.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await view.mouse.down()
        # The new body arrives while the button is held; a round trip to the page lets the
        # refresh go as far as it goes before the release.
        await view.evaluate("window.__held.shift()()")
        await view.evaluate("() => new Promise(r => setTimeout(r, 100))")
        assert await view.locator("#request[data-old]").count() == 1  # not swapped yet
        await view.mouse.up()
        await view.wait_for_selector("#request[data-old]", state="detached")  # swapped after
        ended = await wait_for(client, waiting.id)  # (the page's next bodies stay held)
    assert ended.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_page_waits_to_swap_while_the_pointer_rests_on_a_button(
    start_agent: StartAgent, browser: Browser
) -> None:
    """A body swapped under a pointer resting on a button replaces the button, or moves it
    (a longer status line above it): the click about to come lands elsewhere. The swap
    waits until the pointer leaves."""
    async with refresh_held(start_agent, browser, "ui-hover", "request") as held:
        _, _, view = held
        box = await view.locator("#request button[data-option='approve']").bounding_box()
        assert box is not None
        await view.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        await view.evaluate("window.__held.shift()()")
        await view.evaluate("() => new Promise(r => setTimeout(r, 100))")
        assert await view.locator("#request[data-old]").count() == 1  # not swapped yet
        await view.mouse.move(1, 1)  # the pointer leaves the button
        await view.wait_for_selector("#request[data-old]", state="detached")  # swapped after


async def test_the_retry_button_delivers_a_dead_push_again(
    start_agent: StartAgent,
    browser: Browser,
    database_url: str,
) -> None:
    server = start_agent("serve", "ui-push", A2A_AGENT_PUSH_MAX_ATTEMPTS="2", **PUSH)
    with receiver() as hook:
        hook.otherwise = 500  # down: the config goes dead after two tries
        config = TaskPushNotificationConfig(url=hook.url, token=secret("ui-push-token"), id="hook")
        request = SendMessageRequest(
            message=plan_message([item("a", "true", "true")]),
            configuration=SendMessageConfiguration(
                return_immediately=True, task_push_notification_config=config
            ),
        )
        async with a2a_client(server.url) as client:
            task = None
            async for response in client.send_message(request):
                task = response.task
            assert task is not None
            await wait_for(client, task.id)
        hook.wait_for(lambda: len(hook.received) >= 2)
        for _ in range(100):
            if rows(database_url, "SELECT state FROM push_configs WHERE task_id = %s", task.id) == [
                ("dead",)
            ]:
                break
            await asyncio.sleep(0.1)
        view = await browser.new_page()
        await view.goto(f"{server.url}/ui/tasks/{task.id}")
        await view.wait_for_selector("button[data-config='hook']")
        assert len(hook.received) == 2  # dead: nothing more is tried
        hook.otherwise = 200
        await view.click("button[data-config='hook']")
        ((total,),) = rows(database_url, "SELECT event_seq FROM tasks WHERE id = %s", task.id)
        hook.wait_for(lambda: {r.seq for r in hook.accepted()} >= set(range(1, total + 1)))
        # The page follows the delivery (no task change: the stream's own look sees it).
        await view.wait_for_selector("button[data-config='hook']", state="detached")
    assert rows(
        database_url, "SELECT state, delivered >= %s FROM push_configs WHERE task_id = %s",
        total, task.id,
    ) == [("active", True)]  # fmt: skip
