"""What delegation is made of, apart from the steps: its configuration, the ids and paths it
names things by, where child runs are made, the budget a child gets, what the parent reads of
a delegate, and the two messages a peer's task may have to be sent again until it takes them
(a person's answer, a cancel), by the step that first tries and by the peer watcher after."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from a2a_agent.harness.results import JSON
from a2a_agent.peers import PeerClient, PeerError, PeerRefused, state_name
from a2a_agent.plans import PlanLimits
from a2a_agent.watched import crash_point
from persistence.delegations import DelegationStore, OpenDelegation, PeerAnswer
from persistence.records import (
    TERMINAL_STATES,
    Delegation,
    EffectStart,
    NewTask,
    StepView,
    Submitted,
    TaskRow,
)

log = logging.getLogger(__name__)

MAX_GOAL_CHARS = 4000
SHOWN_OUTPUT = 600  # of each item's output tail, in what the model reads of a child


@dataclass(frozen=True)
class ToolCall:
    """The model's `delegate` call being concluded."""

    view: StepView
    key: str
    item_id: str
    attempt: int
    tool_use: JSON
    then: EffectStart | None


class Children(Protocol):
    """Where child runs are made and canceled (the task store)."""

    async def create_task(self, new: NewTask) -> Submitted: ...
    async def cancel_task(self, task_id: str, owner: str, reason: str) -> TaskRow: ...


@dataclass(frozen=True)
class DelegationConfig:
    plan_limits: PlanLimits
    budget_defaults: Mapping[str, Any]
    budget_caps: Mapping[str, Any]
    policy_defaults: Mapping[str, Any]
    public_url: str
    tag: Callable[[str], str]  # the token a peer's webhook call for a delegation carries


def delegation_id(item_id: str, attempt: int, key: str) -> str:
    return f"d.{item_id}.{attempt}.{key.rsplit(':', 1)[-1]}"


def webhook_path(task_id: str, did: str) -> str:
    return f"/peers/notify/{task_id}/{did}"


def report_for_model(found: Delegation) -> str:
    """What the parent's model reads of an ended delegation: the outcome, the summary and the
    plan with each item's evidence (short), never the delegate's transcript."""
    result = found.result or {}
    report = result.get("report") or {}
    plan = result.get("plan") or {}
    items = [
        {
            "id": i.get("id"),
            "status": i.get("status"),
            "verify": i.get("verify"),
            "exit_code": (i.get("evidence") or {}).get("exit_code"),
            "output_tail": str((i.get("evidence") or {}).get("output_tail", ""))[-SHOWN_OUTPUT:],
        }
        for i in plan.get("items") or []
    ]
    shown = {
        "delegate": (found.child_id and f"child task {found.child_id}")
        or f"peer {found.peer} task {found.remote_id}",
        "state": result.get("state"),
        "status": result.get("status"),
        "summary": report.get("summary"),
        "files_changed": report.get("files_changed"),
        "items": items,
    }
    return json.dumps(shown, indent=1, ensure_ascii=False)


def report_file(found: Delegation, shown: str) -> str:
    return (
        f"# Delegated to {found.peer or found.child_id}\n\n{found.goal}\n\n"
        f"## What came back\n\n```json\n{shown}\n```\n"
    )


# The budget dimensions a child's slice is capped in: (as budget_status() names it, the limit).
CAPPED = (
    ("usd", "max_usd"),
    ("tokens", "max_tokens"),
    ("wall_s", "max_wall_s"),
    ("steps_without_progress", "max_steps_without_progress"),
)


def _left(entry: Any) -> float | None:
    if not isinstance(entry, Mapping) or entry.get("limit") is None:
        return None
    return float(entry["limit"]) - float(entry.get("used") or 0)


def budget_slice(limits: Mapping[str, Any], parent: Mapping[str, Any] | None) -> JSON:
    """A child's limits: `limits` (the slice asked for, over the defaults), each dimension at
    most what the parent has left of it (`parent`: its budget as `budget_status()` shows it).
    The child's charges are the parent's too, so no limit of the child may let it spend what
    the parent may not: money, tokens, wall time, steps without progress, actions in all and
    of each tool the parent limits."""
    status = parent or {}
    sliced: JSON = dict(limits)
    for dimension, name in CAPPED:
        left = _left(status.get(dimension))
        if left is None:
            continue
        wanted = sliced.get(name)
        capped = left if wanted is None else min(float(wanted), left)
        # A limit is more than 0; a parent with nothing left is stopped by its own check.
        sliced[name] = round(max(capped, 0.0001), 6) if name == "max_usd" else max(1, int(capped))
    actions = dict(sliced.get("max_actions") or {})
    total = _left(status.get("actions"))
    if total is not None:
        actions["*"] = max(1, int(min(float(actions.get("*", total)), total)))
    used_by_tool = status.get("actions_by_tool") or {}
    for tool, limit in ((status.get("limits") or {}).get("max_actions") or {}).items():
        if tool == "*" or limit is None:
            continue
        left = float(limit) - float((used_by_tool.get(tool) or {}).get("used") or 0)
        actions[tool] = max(1, int(min(float(actions.get(tool, left)), left)))
    sliced["max_actions"] = actions
    return sliced


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
