"""Whole numbers stay whole: a plan's `maxAttempts: 3` read from a DataPart and written back
in a task's artifacts and metadata is 3, not 3.0, on every binding and version; a fractional
number stays fractional."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from a2a_agent.whole_numbers import keep_whole_numbers
from tests.support.processes import AgentProcess, serving

V10 = {"A2A-Version": "1.0"}


def test_the_printer_writes_whole_doubles_as_integers() -> None:
    keep_whole_numbers()
    given = Struct()
    given.update({"a": 2, "b": 2.5, "c": [1, 2.0, {"d": -3}], "huge": 1e300, "zero": -0.0})
    printed = MessageToDict(given)
    assert printed == {"a": 2, "b": 2.5, "c": [1, 2, {"d": -3}], "huge": 1e300, "zero": 0}
    assert [type(printed[k]) for k in ("a", "b", "huge")] == [int, float, float]
    assert type(printed["c"][1]) is int and type(printed["c"][2]["d"]) is int


@pytest.fixture(scope="module")
def server(module_place: tuple[str, Path]) -> Iterator[AgentProcess]:
    with serving(*module_place, "whole-numbers") as process:
        yield process


def rpc(process: AgentProcess, method: str, params: dict[str, Any], **headers: str) -> Any:
    call = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(f"{process.url}/", json=call, headers=headers, timeout=30).json()["result"]


def plan_item(task: dict[str, Any]) -> dict[str, Any]:
    (plan,) = [a for a in task["artifacts"] if a.get("artifactId", a.get("name")) == "plan"]
    item: dict[str, Any] = plan["parts"][0]["data"]["plan"]["items"][0]
    return item


def assert_whole(task: dict[str, Any]) -> None:
    item = plan_item(task)
    assert type(item["maxAttempts"]) is int and item["maxAttempts"] == 3, item
    assert type(item["attempts"]) is int, item
    metadata = task["metadata"]
    assert type(metadata["generation"]) is int, metadata
    assert type(metadata["progress"]["itemsTotal"]) is int, metadata["progress"]
    assert metadata["budget"]["limits"]["maxUsd"] == 2.5  # a fraction stays one


@pytest.mark.served
def test_a_plan_keeps_its_whole_numbers_on_every_read(server: AgentProcess) -> None:
    """They came back as 3.0, 0.0, 2.0 (protobuf's Struct holds doubles)."""
    part = {"data": {"plan": {"goal": "g", "items": [
        {"id": "a", "run": "sleep 30", "verify": "true", "max_attempts": 3}]},
        "budget": {"max_usd": 2.5}}}  # fmt: skip
    message = {"messageId": "whole-1", "role": "ROLE_USER", "parts": [part]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    sent = rpc(server, "SendMessage", params, **V10)
    task = sent["task"]
    assert_whole(task)
    # The SDK's JSON-RPC path above; the fast read, REST and 0.3's conversions here.
    assert_whole(rpc(server, "GetTask", {"id": task["id"]}, **V10))
    assert_whole(httpx.get(f"{server.url}/tasks/{task['id']}", headers=V10, timeout=30).json())
    at_03 = rpc(server, "tasks/get", {"id": task["id"]})
    (plan,) = [a for a in at_03["artifacts"] if a["name"] == "plan"]
    assert type(plan["parts"][0]["data"]["plan"]["items"][0]["maxAttempts"]) is int
    # What was read from the DataPart and kept: the plan's item and the message's part.
    with psycopg.connect(server.env["DATABASE_URL"]) as conn:
        row = conn.execute("SELECT history FROM tasks WHERE id = %s", (task["id"],)).fetchone()
    assert row is not None
    kept = row[0][0]["parts"][0]["data"]["plan"]["items"][0]["max_attempts"]
    assert type(kept) is int
    rpc(server, "CancelTask", {"id": task["id"]}, **V10)
