"""The two messages a peer's task may have to be sent again until it takes them (a person's
answer, a cancel): each one try, made by the step that first tries and by the peer watcher
(`engine/peer_watch.py`) after."""

from __future__ import annotations

import logging
from pathlib import Path

from a2a_agent.peers import PeerClient, PeerError, PeerRefused, state_name
from a2a_agent.watched import crash_point
from persistence.delegations import DelegationStore, OpenDelegation, PeerAnswer
from persistence.records import TERMINAL_STATES

log = logging.getLogger(__name__)


async def send_answer(
    store: DelegationStore, peers: PeerClient, answer: PeerAnswer, *, fault: Path | None = None
) -> str:
    """One try at giving the peer's task the answer a person gave here, under the answer's own
    messageId (the peer applies a message once, so a try after a crash that lost its outcome
    changes nothing there). `sent`; `refused` when the peer answered that it cannot take it
    (the person reads why on our task); `pending` when it could not be reached or did not
    answer (the peer watcher tries again)."""
    if answer.peer is None or answer.remote_id is None:
        return answer.state
    try:
        task = await peers.reply(
            answer.peer, answer.remote_id, message_id=answer.message_id, approval=answer.approval
        )
    except PeerRefused as exc:
        log.warning("peer %s did not take the answer to %s: %s", answer.peer, answer.pause_id,
                    exc)  # fmt: skip
        await store.answer_refused(answer.task_id, answer.pause_id, str(exc))
        return "refused"
    except PeerError as exc:
        log.warning("could not give the answer to %s to peer %s (tried again later): %s",
                    answer.pause_id, answer.peer, exc)  # fmt: skip
        await store.answer_failed(answer.task_id, answer.pause_id, str(exc))
        return "pending"
    crash_point(fault, "answer-sent")  # tests only
    await store.answer_sent(answer.task_id, answer.pause_id, state_name(task))
    return "sent"


async def cancel_remote(store: DelegationStore, peers: PeerClient, found: OpenDelegation) -> bool:
    """Cancel the peer's task of a delegation whose task here ended. The delegation ends once
    the peer canceled it, or answered that it cannot (its task ended already: that end is kept);
    while the peer cannot be reached it stays pending, and the peer watcher tries again. True
    if it ended."""
    peer, remote = str(found.peer), str(found.remote_id)
    try:
        await peers.cancel(peer, remote)
        outcome = {"state": "canceled", "status": "the delegating task ended"}
    except PeerRefused as refused:
        try:
            task = await peers.get(peer, remote)
        except PeerRefused:
            task = None
        except PeerError as exc:
            return await _cancel_later(store, found, exc)
        state = state_name(task) if task is not None else "unknown"
        why = (
            "it had ended when the delegating task did"
            if state in TERMINAL_STATES
            else f"the peer would not cancel it: {refused}"
        )
        outcome = {"state": state, "status": why}
    except PeerError as exc:
        return await _cancel_later(store, found, exc)
    await store.end(found.task_id, found.id, outcome)
    return True


async def _cancel_later(store: DelegationStore, found: OpenDelegation, exc: PeerError) -> bool:
    log.warning("could not cancel task %s at peer %s (tried again later): %s", found.remote_id,
                found.peer, exc)  # fmt: skip
    await store.touch(found.task_id, found.id)
    return False
