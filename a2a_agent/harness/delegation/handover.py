"""What a delegation hands over and gets back, apart from the steps: its configuration, the
ids and paths it names things by, where child runs are made, the budget a child gets, and
what the parent reads of a delegate."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from a2a_agent.harness.kernel.results import JSON
from a2a_agent.plans import PlanLimits
from persistence.records import (
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
