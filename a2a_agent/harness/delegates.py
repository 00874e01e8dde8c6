"""What delegation is made of, apart from the steps: its configuration, the ids and paths it
names things by, where child runs are made, and what the parent reads of a delegate."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from a2a_agent.harness.results import JSON
from a2a_agent.plans import PlanLimits
from persistence.records import Delegation, EffectStart, NewTask, StepView, Submitted, TaskRow

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
