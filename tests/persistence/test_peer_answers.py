"""An answer a peer took just before a crash lost that record: when the peer watch next
looks at the delegation, it gives the pending answer first, so the delegation cannot end with
the answer still `pending` (the peer keeps a repeated messageId once)."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import Task, TaskState, TaskStatus

from a2a_agent.engine.peer_watch import PeerWatch
from persistence.db import Pool
from persistence.delegations import PostgresDelegationStore
from persistence.records import NewDelegation, StepRecord
from persistence.runs import PostgresRunStore
from tests.persistence.rows import made, recorded, rows


class PeerThatTookIt:
    """A peer whose task already went on with our answer and completed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def _task(self, task_id: str) -> Task:
        return Task(id=task_id, status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))

    async def reply(self, name: str, task_id: str, *, message_id: str, approval: Any) -> Task:
        self.calls.append(("reply", message_id))
        return self._task(task_id)

    async def get(self, name: str, task_id: str) -> Task:
        self.calls.append(("get", task_id))
        return self._task(task_id)


async def test_a_pending_answer_is_given_before_the_peer_task_is_read(pool: Pool) -> None:
    parent = await made(pool)
    sent = NewDelegation("d1", "sub", peer="writer", remote_id="r1")
    await recorded(
        PostgresRunStore(pool),
        parent,
        StepRecord(effect_key=f"{parent}:send", step="send", result={}, delegation=sent),
    )
    store = PostgresDelegationStore(pool)
    queued = await store.queue_answer(
        parent, "d1", "via.d1.q", message_id="m-answer", approval={"decision": "answer"}
    )
    assert queued is not None and queued.state == "pending"
    found = await store.delegation(parent, "d1")
    assert found is not None
    peer = PeerThatTookIt()
    started: list[tuple[str, int]] = []

    async def start_run(task_id: str, segment: int) -> None:
        started.append((task_id, segment))

    await PeerWatch(store, peer, start_run).look(found)  # type: ignore[arg-type]

    assert peer.calls == [("reply", "m-answer"), ("get", "r1")]
    answers = await rows(
        pool, "SELECT state, remote_state FROM delegation_answers WHERE task_id = %s", parent
    )
    assert answers == [{"state": "sent", "remote_state": "completed"}]
    delegation = await rows(pool, "SELECT state FROM delegations WHERE task_id = %s", parent)
    assert delegation == [{"state": "ended"}]
