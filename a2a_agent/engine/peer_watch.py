"""Following the peers' tasks this service waits on.

A peer's push notification (to `/peers/notify/<task>/<delegation>`, carrying the token this
service gave it, and signed when the peer signs) or the supervisor's poll (pushes may not
come) makes this look at the peer's task with GetTask, the authority: a question it asks
surfaces on our task, its end becomes the delegation's result (its report, plan and diff)
and our task's next segment starts. A delegation whose task here ended is canceled there.
The poll also sends again what a peer has not taken yet: an answer a person gave here (kept
in `delegation_answers`), a cancel (the delegation stays pending until the peer took it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import Task

from a2a_agent.harness.delegation.peer_calls import cancel_remote, send_answer
from a2a_agent.peers import PeerClient, PeerError, state_name
from a2a_agent.wire import from_wire
from persistence.delegations import DelegationStore, OpenDelegation
from persistence.records import JSON, TERMINAL_STATES

log = logging.getLogger(__name__)
BATCH = 50


def _artifact_data(task: Task, artifact_id: str, key: str) -> JSON | None:
    for artifact in task.artifacts:
        if artifact.artifact_id == artifact_id:
            for data in get_data_parts(artifact.parts):
                if isinstance(data, dict) and key in data:
                    return dict(from_wire(data[key], key))
    return None


def request_of(task: Task) -> JSON | None:
    """The approval request a peer's task waits on, as our pauses spell it."""
    for data in get_data_parts(task.status.message.parts):
        if isinstance(data, dict) and "approvalRequest" in data:
            return dict(from_wire(data["approvalRequest"], "request"))
    return None


class PeerWatch:
    def __init__(
        self,
        store: DelegationStore,
        peers: PeerClient,
        start_run: Callable[[str, int], Awaitable[None]],
        *,
        poll_s: float = 5.0,
    ) -> None:
        self.store = store
        self.peers = peers
        self.start_run = start_run
        self.poll_s = poll_s
        self._polled_at = 0.0

    async def poll(self) -> None:
        """Look at the peers' tasks not heard of for `poll_s` (the supervisor's hook)."""
        if time.monotonic() - self._polled_at < self.poll_s:
            return
        self._polled_at = time.monotonic()
        for answer in await self.store.answers_to_send(self.poll_s, BATCH):
            await send_answer(self.store, self.peers, answer)
        for found in await self.store.open_peer_delegations(self.poll_s, BATCH):
            await self.look(found)

    async def refresh(self, task_id: str, delegation_id: str) -> bool:
        """A push from the peer: look now. False if there is no such pending delegation."""
        found = await self.store.delegation(task_id, delegation_id)
        if found is None or found.state != "pending" or found.peer is None:
            return False
        await self.look(found)
        return True

    async def look(self, found: OpenDelegation) -> None:
        peer, remote = str(found.peer), str(found.remote_id)
        if found.parent_state in TERMINAL_STATES:
            # Our task ended (a cancel): its peer's task has nothing to do any more.
            await cancel_remote(self.store, self.peers, found)
            return
        # An answer still pending goes first: what the peer's task did next may be its doing.
        for answer in await self.store.pending_answers(found.task_id, found.id):
            await send_answer(self.store, self.peers, answer)
        try:
            task = await self.peers.get(peer, remote)
        except PeerError as exc:
            log.warning("could not look at task %s at peer %s: %s", remote, peer, exc)
            await self.store.touch(found.task_id, found.id)
            return
        state = state_name(task)
        result = await self._result(peer, task) if state in TERMINAL_STATES else None
        segment = await self.store.changed(
            found.task_id,
            found.id,
            state=state,
            request=request_of(task) if state == "input_required" else None,
            result=result,
        )
        if segment is not None:
            await self.start_run(found.task_id, segment)

    async def _result(self, peer: str, task: Task) -> JSON:
        """What the peer's task ended with: its status, report, plan and diff."""
        text = task.status.message.parts[0].text if task.status.message.parts else ""
        return {
            "state": state_name(task),
            "status": text,
            "report": _artifact_data(task, "report", "report"),
            "plan": _artifact_data(task, "plan", "plan"),
            "diff": await self._diff(peer, task),
        }

    async def _diff(self, peer: str, task: Task) -> str | None:
        for artifact in task.artifacts:
            if artifact.artifact_id != "diff" or not artifact.parts:
                continue
            part: Any = artifact.parts[0]
            if part.WhichOneof("content") == "raw":
                return bytes(part.raw).decode(errors="replace")
            try:
                return (await self.peers.fetch(peer, part.url)).decode(errors="replace")
            except PeerError as exc:
                log.warning("could not fetch the diff of %s from peer %s: %s", task.id, peer, exc)
        return None
