"""Every kind of bad input gets its A2A error with a message a person can act on, and
nothing is stored half-way."""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.processes import AgentProcess

INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
MAX_MESSAGE_BYTES = 4096


pytestmark = pytest.mark.served  # every test here drives the module's server


@pytest.fixture(scope="module")
def server(
    make_database: Callable[[str | None], str],
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[AgentProcess, str]]:
    url = make_database(template_db)
    process = AgentProcess(
        role="serve",
        database_url=url,
        home=tmp_path_factory.mktemp("home"),
        executor_id="bad-input",
        env={"A2A_AGENT_MAX_MESSAGE_BYTES": str(MAX_MESSAGE_BYTES)},
    ).start()
    yield process, url
    process.kill()


def rpc(process: AgentProcess, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(
        f"{process.url}/",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={"A2A-Version": "1.0"},
        timeout=30,
    )
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def message(*parts: dict[str, Any], task_id: str = "") -> dict[str, Any]:
    msg: dict[str, Any] = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": list(parts),
    }
    if task_id:
        msg["taskId"] = task_id
    return msg


def plan_part(plan: Any) -> dict[str, Any]:
    return {"data": {"plan": plan}, "mediaType": "application/json"}


def send(process: AgentProcess, msg: dict[str, Any], **config: Any) -> dict[str, Any]:
    return rpc(
        process,
        "SendMessage",
        {"message": msg, "configuration": {"returnImmediately": True, **config}},
    )


def error_of(body: dict[str, Any], code: int) -> str:
    assert "error" in body, body
    assert body["error"]["code"] == code, body
    text: str = body["error"]["message"]
    return text


def count_rows(url: str, task_id: str | None = None) -> tuple[int, int, int, int]:
    """Tasks and items, with the transitions and events of `task_id` (or of none).

    Every transition and event belongs to a task, so a refused send that stored anything
    shows as a task more; other tests' runs on this module's server still add transitions
    and events of their own tasks, which the counts of all of them would catch at random."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM tasks), (SELECT count(*) FROM items),"
            " (SELECT count(*) FROM transitions WHERE task_id = %(id)s),"
            " (SELECT count(*) FROM events WHERE task_id = %(id)s)",
            {"id": task_id or ""},
        ).fetchone()
    assert row is not None
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


GOOD_ITEM = {"id": "a", "title": "A", "run": "true", "verify": "true"}

BAD_PLANS: list[tuple[str, Any, str]] = [
    ("no items", {"goal": "g", "items": []}, "non-empty list"),
    ("items missing", {"goal": "g"}, "plan.items"),
    ("no goal", {"items": [GOOD_ITEM]}, "plan.goal"),
    (
        "item without verify",
        {"goal": "g", "items": [{"id": "a", "run": "true"}]},
        "no verify command",
    ),
    ("duplicate ids", {"goal": "g", "items": [GOOD_ITEM, GOOD_ITEM]}, "appears twice"),
    ("non-string run", {"goal": "g", "items": [{**GOOD_ITEM, "run": 5}]}, "run must be a string"),
    (
        "non-string verify",
        {"goal": "g", "items": [{**GOOD_ITEM, "verify": ["true"]}]},
        "verify must be a string",
    ),
    (
        "verify object without command",
        {"goal": "g", "items": [{**GOOD_ITEM, "verify": {"timeout_s": 5}}]},
        "verify.command",
    ),
    (
        "fractional max_attempts",
        {"goal": "g", "items": [{**GOOD_ITEM, "max_attempts": 1.5}]},
        "whole number",
    ),
    (
        "zero max_attempts",
        {"goal": "g", "items": [{**GOOD_ITEM, "max_attempts": 0}]},
        "between 1 and",
    ),
    ("unknown item field", {"goal": "g", "items": [{**GOOD_ITEM, "cmd": "x"}]}, "unknown field"),
    ("bad item id", {"goal": "g", "items": [{**GOOD_ITEM, "id": "a b/c"}]}, ".id must be"),
    ("plan not an object", ["a"], "must be an object"),
]


@pytest.mark.parametrize(("case", "plan", "expected"), BAD_PLANS, ids=[c[0] for c in BAD_PLANS])
def test_bad_plans_are_refused_and_nothing_is_stored(
    server: tuple[AgentProcess, str], case: str, plan: Any, expected: str
) -> None:
    process, url = server
    before = count_rows(url)
    text = error_of(send(process, message(plan_part(plan))), INVALID_PARAMS)
    assert expected in text, text
    assert count_rows(url) == before


def test_data_part_without_plan_is_refused(server: tuple[AgentProcess, str]) -> None:
    process, url = server
    before = count_rows(url)
    body = send(process, message({"data": {"goal": "x"}}))
    said = error_of(body, INVALID_PARAMS)
    assert 'a data part must be an object with "plan", "budget"' in said
    assert count_rows(url) == before


def test_wrong_content_types_are_refused(server: tuple[AgentProcess, str]) -> None:
    process, url = server
    before = count_rows(url)
    # A file seeds the workspace; alone it says nothing to do.
    raw = {"raw": base64.b64encode(b"\x89PNG").decode(), "mediaType": "image/png"}
    assert "no text and no plan" in error_of(send(process, message(raw)), INVALID_PARAMS)
    odd = {"text": "hello", "mediaType": "text/html"}
    assert "text/html" in error_of(send(process, message(odd)), CONTENT_TYPE_NOT_SUPPORTED)
    body = send(
        process,
        message(plan_part({"goal": "g", "items": [GOOD_ITEM]})),
        acceptedOutputModes=["image/png"],
    )
    assert "acceptedOutputModes" in error_of(body, CONTENT_TYPE_NOT_SUPPORTED)
    assert count_rows(url) == before


def test_oversized_message_is_refused(server: tuple[AgentProcess, str]) -> None:
    process, url = server
    before = count_rows(url)
    body = send(process, message({"text": "x" * (MAX_MESSAGE_BYTES + 100)}))
    text = error_of(body, INVALID_REQUEST)
    assert str(MAX_MESSAGE_BYTES) in text and "A2A_AGENT_MAX_MESSAGE_BYTES" in text
    assert count_rows(url) == before


def test_empty_message_is_refused(server: tuple[AgentProcess, str]) -> None:
    process, _ = server
    assert "no parts" in error_of(send(process, message()), INVALID_PARAMS)


def test_unknown_task_ids(server: tuple[AgentProcess, str]) -> None:
    process, url = server
    missing = str(uuid.uuid4())
    assert missing in error_of(rpc(process, "GetTask", {"id": missing}), TASK_NOT_FOUND)
    error_of(rpc(process, "CancelTask", {"id": missing}), TASK_NOT_FOUND)
    error_of(rpc(process, "SubscribeToTask", {"id": missing}), TASK_NOT_FOUND)
    before = count_rows(url)
    body = send(process, message({"text": "more"}, task_id=missing))
    error_of(body, TASK_NOT_FOUND)
    assert count_rows(url) == before
    rest = httpx.get(f"{process.url}/tasks/{missing}", headers={"A2A-Version": "1.0"})
    assert rest.status_code == 404


def test_finished_task_takes_no_messages_and_cannot_be_canceled(
    server: tuple[AgentProcess, str],
) -> None:
    process, url = server
    body = send(process, message(plan_part({"goal": "g", "items": [GOOD_ITEM]})))
    task_id = body["result"]["task"]["id"]
    deadline = time.monotonic() + 60
    while rpc(process, "GetTask", {"id": task_id})["result"]["status"]["state"] != (
        "TASK_STATE_COMPLETED"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    before = count_rows(url, task_id)
    text = error_of(
        send(process, message({"text": "again"}, task_id=task_id)), UNSUPPORTED_OPERATION
    )
    assert "completed" in text and "without taskId" in text
    assert "completed" in error_of(rpc(process, "CancelTask", {"id": task_id}), TASK_NOT_CANCELABLE)
    error_of(rpc(process, "SubscribeToTask", {"id": task_id}), UNSUPPORTED_OPERATION)
    assert count_rows(url, task_id) == before


def test_list_and_push_parameters(server: tuple[AgentProcess, str]) -> None:
    process, _ = server
    assert "pageSize" in error_of(rpc(process, "ListTasks", {"pageSize": 500}), INVALID_PARAMS)
    text = error_of(rpc(process, "ListTasks", {"pageToken": "not-a-token"}), INVALID_PARAMS)
    assert "page token" in text
    # A status that names no state is refused on both bindings (protobuf's parser dropped
    # it, and every task was listed); the state's own name filters. (JSON-RPC's is refused
    # at the door with every other enum value protobuf does not know: params_v10.py.)
    for status in ("BOGUS", "completed"):
        said = error_of(rpc(process, "ListTasks", {"status": status}), INVALID_PARAMS)
        assert "params.status must be TASK_STATE_SUBMITTED, " in said
        assert "TASK_STATE_COMPLETED" in said and f'(got "{status}")' in said
    for path in ("/tasks", "/acme/tasks"):  # and under a tenant, which the SDK routes too
        listed = httpx.get(
            f"{process.url}{path}", params={"status": "completed"}, headers={"A2A-Version": "1.0"}
        )
        assert listed.status_code == 400 and "is not a task state" in listed.text, path
        assert listed.json()["error"]["status"] == "INVALID_ARGUMENT"
    # One task of each kind, so the filter has something to keep and something to leave out.
    rejected = send(process, message({"text": "a goal, and no model here"}))["result"]["task"]
    planned = send(process, message(plan_part({"goal": "g", "items": [GOOD_ITEM]})))
    named = rpc(process, "ListTasks", {"status": "TASK_STATE_REJECTED", "pageSize": 100})
    assert {t["status"]["state"] for t in named["result"]["tasks"]} <= {"TASK_STATE_REJECTED"}
    listed_ids = {t["id"] for t in named["result"]["tasks"]}
    assert rejected["id"] in listed_ids and planned["result"]["task"]["id"] not in listed_ids
    body = rpc(
        process,
        "CreateTaskPushNotificationConfig",
        {"taskId": str(uuid.uuid4()), "url": "http://127.0.0.1:9/hook"},
    )
    assert "does not exist" in error_of(body, TASK_NOT_FOUND)


def test_missing_version_header_is_refused(server: tuple[AgentProcess, str]) -> None:
    process, _ = server
    response = httpx.post(
        f"{process.url}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}},
    )
    answer = response.json()
    assert answer["id"] == 1 and answer["error"]["code"] == -32009
    assert answer["error"]["message"] == (
        "'GetTask' is an A2A 1.0 method: send the header A2A-Version: 1.0; a request without "
        "it speaks A2A 0.3 (at 0.3 it is 'tasks/get')"
    )


@pytest.mark.parametrize(
    ("method", "then"),
    [("tasks/get", "GetTask"), ("message/send", "SendMessage"), ("tasks/cancel", "CancelTask")],
)
def test_a_0_3_method_sent_as_1_0_says_which_to_change(
    server: tuple[AgentProcess, str], method: str, then: str
) -> None:
    """It was the SDK's internal error (-32603) or a pydantic dump, by method."""
    process, _ = server
    response = httpx.post(
        f"{process.url}/",
        json={"jsonrpc": "2.0", "id": "q", "method": method, "params": {"id": "x"}},
        headers={"A2A-Version": "1.0"},
    )
    answer = response.json()
    assert response.status_code == 200 and answer["id"] == "q"
    assert answer["error"]["code"] == -32009
    assert f"'{method}' is an A2A 0.3 method" in answer["error"]["message"]
    assert f"call '{then}', or send A2A-Version: 0.3" in answer["error"]["message"]


def test_without_a_key_text_tasks_and_model_items_are_rejected(
    server: tuple[AgentProcess, str], tmp_path: Path
) -> None:
    process, _ = server
    body = send(process, message({"text": "write a parser"}))
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert "ANTHROPIC_API_KEY" in task["status"]["message"]["parts"][0]["text"]
    plan = {"goal": "g", "items": [GOOD_ITEM, {"id": "b", "verify": "true"}]}
    task = send(process, message(plan_part(plan)))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert "['b']" in task["status"]["message"]["parts"][0]["text"]


BAD_BUDGETS: list[tuple[str, Any, str]] = [
    ("above the cap", {"max_usd": 1_000_000}, "above this server's cap"),
    ("negative", {"max_tokens": -5}, "more than 0"),
    ("unknown field", {"max_money": 3}, "unknown field"),
    ("actions not an object", {"max_actions": 5}, "maxActions must be an object"),
]


@pytest.mark.parametrize(
    ("case", "budget", "expected"), BAD_BUDGETS, ids=[c[0] for c in BAD_BUDGETS]
)
def test_bad_budgets_are_refused_and_nothing_is_stored(
    server: tuple[AgentProcess, str], case: str, budget: Any, expected: str
) -> None:
    process, url = server
    before = count_rows(url)
    part = {"data": {"plan": {"goal": "g", "items": [GOOD_ITEM]}, "budget": budget}}
    text = error_of(send(process, message(part)), INVALID_PARAMS)
    assert expected in text, text
    assert count_rows(url) == before


def test_budget_only_in_the_first_message(server: tuple[AgentProcess, str]) -> None:
    process, _ = server
    body = send(
        process,
        message(
            plan_part({"goal": "g", "items": [{"id": "a", "run": "sleep 5", "verify": "true"}]})
        ),
    )
    task_id = body["result"]["task"]["id"]
    follow_up = message({"data": {"budget": {"max_usd": 1}}}, task_id=task_id)
    assert "first message" in error_of(send(process, follow_up), INVALID_PARAMS)
    rpc(process, "CancelTask", {"id": task_id})


def test_nul_characters_are_refused_and_nothing_is_stored(
    server: tuple[AgentProcess, str],
) -> None:
    process, url = server
    before = count_rows(url)
    text_body = send(process, message({"text": "do\u0000this"}))
    assert "NUL character" in error_of(text_body, -32602)
    plan = {"goal": "g", "items": [{**GOOD_ITEM, "run": "echo a\u0000b"}]}
    plan_body = send(process, message(plan_part(plan)))
    assert "NUL character" in error_of(plan_body, -32602)
    assert "run" in plan_body["error"]["message"]
    rest = httpx.post(
        f"{process.url}/message:send",
        json={"message": message({"text": "a\u0000b"})},
        headers={"A2A-Version": "1.0"},
        timeout=30,
    )
    assert rest.status_code == 400 and "NUL character" in rest.text
    assert count_rows(url) == before


def test_a_url_to_this_machine_is_refused_in_words_of_what_it_is(
    server: tuple[AgentProcess, str],
) -> None:
    """An input file's URL (and a repository's) on loopback was refused as "the webhook host
    ..." ; the allowlists that govern them are named."""
    process, url = server
    before = count_rows(url)
    given = {"url": "http://127.0.0.1:9/notes.txt", "filename": "notes.txt"}
    said = error_of(send(process, message(given, plan_part({"goal": "g", "items": [GOOD_ITEM]}))),
                    INVALID_PARAMS)  # fmt: skip
    assert said.startswith(
        "file notes.txt's URL is refused: its host '127.0.0.1' resolves to 127.0.0.1: input "
        "files are not fetched from loopback, private, link-local or metadata addresses"
    ), said
    assert "A2A_AGENT_GIT_ALLOWED_URLS" in said and "A2A_AGENT_PUSH_ALLOW_HOSTS" in said
    assert "webhook host" not in said
    workspace = {"workspace": {"git": {"url": "http://127.0.0.1:9/x.git"}}}
    part = {"data": {"plan": {"goal": "g", "items": [GOOD_ITEM]}, **workspace}}
    said = error_of(send(process, message(part)), INVALID_PARAMS)
    assert "workspace.git.url is refused: its host '127.0.0.1'" in said
    assert "repositories on loopback" in said and "webhook host" not in said
    assert count_rows(url) == before
