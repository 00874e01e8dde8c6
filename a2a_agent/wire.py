"""The names our JSON uses on the wire: the protocol's convention, camelCase.

Everything a caller reads from us (task metadata, the plan and report artifacts, stream
events) and everything the workspace's plan.json holds spells our field names in camelCase
(`itemsTotal`, `exitCode`, `maxAttempts`, a budget's `stepsWithoutProgress`). Rows keep
snake_case; the conversion happens here, by name: only our own field names change, never
data that happens to be a key (an item id, a tool name). The plan and budget a caller sends
may use either spelling (camelCase is the documented one).
"""

from __future__ import annotations

import re
from typing import Any

from a2a_agent.errors import PlanError

SNAKE_NAMES = [
    "items_total",
    "items_done",
    "items_failed",
    "current_item",
    "wall_s",
    "steps_without_progress",
    "actions_by_tool",
    "max_usd",
    "max_tokens",
    "max_wall_s",
    "max_steps_without_progress",
    "max_actions",
    "budget_alerts",
    "threshold_pct",
    "max_attempts",
    "run_timeout_s",
    "verify_timeout_s",
    "timeout_s",
    "exit_code",
    "output_tail",
    "duration_s",
    "timed_out",
    "cannot_run",
    "checks_passed",
    "files_changed",
    "steps_rerun",
    "workspaces_restored",
    "task_id",
    "items_skipped",
    "review_plan",
    "on_item_failure",
    "approval_expires_s",
    "on_expiry",
    "budget_pause",
    "approval_request",
    "expires_at",
    "continued_by",
    "max_age_s",
    "checked_at",
    "decided_by",
    "decided_at",
    "requested_at",
    "verify_command",
    "item_id",
    "on_weak_check",
    "failed_before_passed_after",
    "precheck_skipped",
    "not_prechecked",
    "on_regression",
    "reverify_every",
    "verify_independent",
    "broken_by",
    "at_commit",
    "items_regressed",
    "items_interrupted",
    "media_type",
    "start_commit",
    "from_task",
    "approve_publish",
    "delegate_to",
    "remote_task",
    "remote_state",
    "stopped_at",
]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


CAMEL = {name: camel(name) for name in SNAKE_NAMES}
SNAKE = {camel_name: name for name, camel_name in CAMEL.items()}
# Maps whose keys are data: their keys stay, their values are ours again.
DATA_MAPS = frozenset({"attempts", "actions_by_tool", "max_actions"})
_DIMENSION = re.compile(r"^(wall_s|steps_without_progress)(?=$|[:.])")


def to_wire(value: Any, *, keys_are_data: bool = False) -> Any:
    """`value` with our field names in camelCase (and budget dimensions, which are names)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key) if keys_are_data else CAMEL.get(str(key), str(key))
            shown = item
            if key == "dimension" and isinstance(item, str):
                shown = _dimension(item)
            elif key == "alerts" and isinstance(item, list):
                shown = [_dimension(a) if isinstance(a, str) else a for a in item]
            out[name] = to_wire(shown, keys_are_data=not keys_are_data and key in DATA_MAPS)
        return out
    if isinstance(value, list):
        return [to_wire(item) for item in value]
    return value


def _dimension(text: str) -> str:
    return _DIMENSION.sub(lambda m: camel(m.group(1)), text)


def from_wire(value: Any, where: str, *, keys_are_data: bool = False) -> Any:
    """A caller's plan or budget with our field names as we store them; either spelling is
    taken, both at once is refused."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = str(key) if keys_are_data else SNAKE.get(str(key), str(key))
            if name in out:
                raise PlanError(
                    f"{where} has both {CAMEL.get(name, name)!r} and {name!r}; send one"
                )
            out[name] = from_wire(
                item, f"{where}.{key}", keys_are_data=not keys_are_data and name in DATA_MAPS
            )
        return out
    if isinstance(value, list):
        return [from_wire(item, f"{where}[{n}]") for n, item in enumerate(value)]
    return value


def wire_name(name: str) -> str:
    """How a field is spelled for callers (in messages that name it)."""
    return CAMEL.get(name, name)
