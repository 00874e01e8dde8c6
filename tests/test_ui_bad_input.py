"""What the dashboard and the task files tell a caller that sent something they cannot use, in
process (`tests/support/in_process.py`, authentication off: every scope): a body that is not
JSON, a control character (NUL) in the address or in a field, each refused with 400 and a
sentence in the form the route answers its other errors, before the database sees it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process import InProcess, in_process

ACTIONS = ("decide", "note", "cancel", "continue", "retry-push")
PLAN = {"goal": "wait", "items": [{"id": "a", "title": "a", "run": "true", "verify": "true"}]}


@pytest.fixture
async def app(database_url: str, home: Path) -> AsyncIterator[InProcess]:
    async with in_process(database_url, home) as running:
        yield running


async def a_task(app: InProcess) -> str:
    """A stored task (it waits for a worker that is not there)."""
    message: dict[str, Any] = {
        "messageId": "m-1",
        "role": "ROLE_USER",
        "parts": [{"data": {"plan": PLAN}}],
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message, "configuration": {"returnImmediately": True}},
    }
    response = await app.http.post("/", json=call, headers={"A2A-Version": "1.0"})
    return str(response.json()["result"]["task"]["id"])


def refused(response: Any, said: str) -> None:
    assert response.status_code == 400, (response.status_code, response.text[:300])
    assert set(response.json()) == {"error"}, response.text
    assert said in response.json()["error"], response.text


async def test_a_body_that_is_not_json_is_refused_in_words(app: InProcess) -> None:
    task_id = await a_task(app)
    typed = {"Content-Type": "application/json"}
    for path in ("/ui/login", *(f"/ui/tasks/{task_id}/{action}" for action in ACTIONS)):
        response = await app.http.post(path, content=b"not json", headers=typed)
        refused(response, "the body is not JSON (at line 1, column 1); send a JSON object")
    # A key that is not a text is no key.
    refused(await app.http.post("/ui/login", json={"key": 7}), "send the key as a text")
    # Nothing was done: the task still waits, with no note.
    page = await app.http.get(f"/ui/tasks/{task_id}")
    assert page.status_code == 200 and "canceled from the dashboard" not in page.text


CONTROL = "contains a control character (such as %00, NUL)"


@pytest.mark.parametrize(
    ("path", "what", "form"),
    [
        ("/ui?owner=%00", "the query's 'owner' ", "page"),
        ("/ui?state=working&owner=a%01b", "the query's 'owner' ", "page"),
        ("/ui/tasks-body?owner=%00", "the query's 'owner' ", "text"),
        ("/ui/tasks/%00", "the task id in the address ", "page"),
        ("/ui/tasks/%00/body", "the task id in the address ", "text"),
        ("/ui/tasks/%00/live", "the task id in the address ", "text"),
        ("/ui/tasks/x/live?since=%00", "the query's 'since' ", "text"),
        ("/outputs/%00/diff", "the task id in the address ", "json"),
        ("/outputs/x/%00", "the file name in the address ", "json"),
        ("/inputs/%00/1", "the task id in the address ", "json"),
    ],
)
async def test_a_control_character_in_the_address_is_refused(
    app: InProcess, path: str, what: str, form: str
) -> None:
    # Bounded: the live stream of a task id with NUL was an endless stream of nothing.
    response = await asyncio.wait_for(app.http.get(path), 10)
    assert response.status_code == 400, (response.status_code, response.text[:300])
    said = what + CONTROL
    if form == "json":
        assert said in response.json()["error"]
    elif form == "text":  # what the page's script fetches (a fragment, the live stream): plain
        # text, since it quotes the query; the live stream's 404 is plain text too
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text.startswith(said)
    else:  # the page an operator's browser shows, the sentence in its error line
        assert response.headers["content-type"].startswith("text/html")
        shown = said.replace("'", "&#39;")
        assert f'<p class="error" id="error">{shown}' in response.text


async def test_a_control_character_in_an_action_address_is_refused(app: InProcess) -> None:
    task_id = await a_task(app)
    for action in ACTIONS:
        response = await app.http.post(f"/ui/tasks/%00/{action}", json={"text": "hi"})
        refused(response, "the task id in the address " + CONTROL)
    # Nothing was done: the task was not canceled.
    page = await app.http.get(f"/ui/tasks/{task_id}")
    assert page.status_code == 200 and "canceled from the dashboard" not in page.text


async def test_a_field_the_dashboard_cannot_use_is_refused(app: InProcess) -> None:
    # A config id with NUL reached the database ("the database refused a value", 503); one
    # that is not a text failed there ("see the server log"); a note that is not a text was
    # stored as Python's repr of it; a key with NUL set a cookie no key matches.
    task_id = await a_task(app)
    act = f"/ui/tasks/{task_id}/retry-push"
    refused(await app.http.post(act, json={"config_id": "a\u0000"}), "config_id contains a")
    refused(await app.http.post(act, json={"config_id": {"x": 1}}), "config_id must be a")
    note = f"/ui/tasks/{task_id}/note"
    refused(await app.http.post(note, json={"text": {"x": 1}}), "send the note as a text")
    assert "{'x': 1}" not in (await app.http.get(f"/ui/tasks/{task_id}/body")).text
    refused(await app.http.post("/ui/login", json={"key": "a2a_\u0000"}), "the key contains")
    # The retry with no id still retries the task's dead pushes (none).
    fine = await app.http.post(act, json={})
    assert fine.status_code == 200 and fine.json() == {"ok": True, "retried": []}


async def test_a_live_stream_of_a_task_that_is_not_there_is_a_404(app: InProcess) -> None:
    """It opened a stream that said nothing until the page was closed."""
    response = await asyncio.wait_for(app.http.get("/ui/tasks/no-such-task/live"), 10)
    assert response.status_code == 404 and "no such task: no-such-task" in response.text


async def test_the_live_stream_refuses_a_nul_as_the_body_fragment_does(
    database_url: str, home: Path
) -> None:
    """With keys: the live stream's address with a NUL was answered with the login page (its
    form, the sentence in its error line) where the task body's was the sentence in plain
    text. Logged in (the dashboard's cookie), both are the 400 with the sentence; logged out,
    both send the browser to the login page, as every dashboard path does."""
    keyed = {"A2A_AGENT_INSECURE_OPEN": "0"}
    async with in_process(database_url, home, keyed) as running:
        key = (home / "admin.key").read_text().strip()

        async def answer(path: str, headers: dict[str, str]) -> tuple[Any, ...]:
            response = await asyncio.wait_for(running.http.get(path, headers=headers), 10)
            kind = response.headers.get("content-type")
            return response.status_code, kind, response.headers.get("location"), response.text

        cookie = {"Cookie": f"a2a_agent_key={key}"}
        said = "the task id in the address " + CONTROL
        live = await answer("/ui/tasks/%00/live", cookie)
        assert live[:3] == (400, "text/plain; charset=utf-8", None) and said in live[3], live
        assert live == await answer("/ui/tasks/%00/body", cookie)
        logged_out = await answer("/ui/tasks/%00/live", {})
        assert logged_out[:3] == (303, None, "/ui/login"), logged_out
        assert logged_out == await answer("/ui/tasks/%00/body", {})


async def test_a_login_while_the_database_is_away_says_so(database_url: str, home: Path) -> None:
    """The key's lookup raised through the route: a 500 that read as the server's fault."""
    keyed = {"A2A_AGENT_INSECURE_OPEN": "0"}
    async with in_process(database_url, home, keyed) as running:
        key = (home / "admin.key").read_text().strip()
        await running.runtime.pool.close()  # every lookup now finds no connection
        response = await running.http.post("/ui/login", json={"key": key})
    assert response.status_code == 503, (response.status_code, response.text[:300])
    assert "the database is unavailable, so the key cannot be checked" in response.json()["error"]
