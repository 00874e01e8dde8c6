"""Delegation (issue 17) with authentication on: a child run belongs to the principal of the
run that made it (the owner is part of every query, so nobody else sees it), and a peer is
called with the key A2A_AGENT_PEERS gives for it (its tasks are that key's principal's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, ListTasksRequest
from a2a.utils.errors import InvalidRequestError

from tests.support.a2a import a2a_client, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env
from tests.support.processes import AgentProcess, StartAgent
from tests.test_auth import KEYED, make_key, rpc
from tests.test_delegation import (
    COMPLETED,
    SURVEY,
    WRITE_HELLO,
    delegated_plan,
    delegations_of,
    peer_env,
    survey_routes,
)
from tests.test_pauses import data_message


async def test_a_child_is_its_parents_principals_and_a_peer_is_called_with_its_key(
    start_agent: StartAgent, fake: FakeAnthropic, peer: AgentProcess, database_url: str, home: Path
) -> None:
    ours_there = make_key(peer, "ours-at-helper", "read", "submit", "run", "approve")
    routed = survey_routes()
    fake.add(*routed.entries)
    server = start_agent(
        "serve", "deleg-auth", **model_env(fake), **peer_env(peer, ours_there), **KEYED
    )
    # `run`: the plan sent to the peer carries commands (the caller's own, as any plan's).
    alice = make_key(server, "alice", "read", "submit", "approve", "run")
    bob = make_key(server, "bob", "read", "submit", "approve")
    items = [SURVEY, delegated_plan(WRITE_HELLO, "grep -qx hello hello.txt")]
    async with a2a_client(server.url, key=alice) as client:
        task = await send(client, data_message({"plan": {"goal": "both", "items": items}}))
        done = await wait_for(client, task.id, timeout=120)
        assert done.status.state == COMPLETED, done.status.message
        child_id, remote_id = (
            next(d[k] for d in delegations_of(done) if d.get(k)) for k in ("child", "remoteTask")
        )
        child = await client.get_task(GetTaskRequest(id=child_id))  # alice's own
        assert child.status.state == COMPLETED
        mine = {t.id for t in (await client.list_tasks(ListTasksRequest())).tasks}
        assert mine == {done.id, child_id}
    assert rows(database_url, "SELECT id, owner FROM tasks ORDER BY created_at") == [
        (done.id, "alice"),
        (child_id, "alice"),
    ]
    # Bob sees no child of alice's, however he asks.
    for method, params in (("GetTask", {"id": child_id}), ("CancelTask", {"id": child_id})):
        answer = rpc(server.url, method, params, bob).text
        assert "TaskNotFound" in answer or '"code":-32001' in answer, (method, answer)
    async with a2a_client(server.url, key=bob) as client:
        assert list((await client.list_tasks(ListTasksRequest())).tasks) == []
    # The peer's task is the principal's whose key A2A_AGENT_PEERS names for it.
    assert rows(peer.env["DATABASE_URL"], "SELECT id, owner FROM tasks") == [
        (remote_id, "ours-at-helper")
    ]
    assert (home / "workspaces" / done.id / "hello.txt").read_text() == "hello\n"  # its diff
    # Its pushes reached our webhook, which needs no key of ours (the token we gave it).
    ((delivered, error),) = rows(
        peer.env["DATABASE_URL"], "SELECT delivered, last_error FROM push_configs"
    )
    assert delivered > 0 and error is None


async def test_commands_in_a_plan_for_a_peer_need_the_run_scope(
    start_agent: StartAgent, peer: AgentProcess, database_url: str
) -> None:
    ours_there = make_key(peer, "ours-at-helper", "read", "submit", "run", "approve")
    server = start_agent("serve", "deleg-scope", **peer_env(peer, ours_there), **KEYED)
    caller = make_key(server, "carol", "read", "submit")  # no `run`
    no_commands = {"goal": "read it", "items": [{"id": "r", "title": "R", "verify": "true"}]}
    plans = {
        "with": [delegated_plan(WRITE_HELLO, "test -f hello.txt")],
        "without": [delegated_plan(no_commands, "true")],
    }
    async with a2a_client(server.url, key=caller) as client:
        with pytest.raises(InvalidRequestError, match="'run' scope"):
            await send(client, data_message({"plan": {"goal": "g", "items": plans["with"]}}))
        assert rows(database_url, "SELECT count(*) FROM tasks") == [(0,)]
        accepted = await send(
            client, data_message({"plan": {"goal": "g", "items": plans["without"]}})
        )
    assert accepted.id
