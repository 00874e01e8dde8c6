"""JSON Schemas of what a caller sends in DataParts: the plan and the budget.

Made from this server's own limits (items per plan, timeouts, budget caps) and served at
stable URLs, which the agent card names (`plan_extension`). The harness's own validation
(`a2a_agent/plans.py`, `a2a_agent/budget.py`) stays the authority; the schemas say the same
in a form an orchestrator can check before it sends (tests keep the two in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_agent.budget import MAX_TOOL_LIMITS, TOOL_NAME
from a2a_agent.plans import (
    ITEM_ID,
    MAX_ASK_CHARS,
    MAX_ATTEMPTS_CAP,
    MAX_COMMAND_CHARS,
    MAX_EXPIRES_S,
    MAX_FACTS,
    MAX_GOAL_CHARS,
    MAX_TITLE_CHARS,
    ON_EXPIRY,
    ON_ITEM_FAILURE,
    ON_REGRESSION,
    ON_WEAK_CHECK,
    RESERVED_IDS,
    PlanLimits,
)
from a2a_agent.sources import MAX_DEPTH, REF

JSON = dict[str, Any]
DRAFT = "https://json-schema.org/draft/2020-12/schema"
PLAN_PATH = "/schemas/plan.v1.json"
BUDGET_PATH = "/schemas/budget.v1.json"
WORKSPACE_PATH = "/schemas/workspace.v1.json"
PUBLISH_PATH = "/schemas/publish.v1.json"


def _whole(pattern: str) -> str:
    """A Python `^...$` pattern as one that matches the whole string alike in Python's `re`
    (whose `$` also matches before a final newline) and in ECMA-262."""
    return pattern.removesuffix("$") + "$(?!\\n)"


SOURCE_REF = _whole(REF.pattern)
EXTENSION_URI = "https://github.com/a2a-agent/a2a-agent/extensions/verified-plan/v1"
SOMETHING = r"\S"  # not empty, not only spaces
CONTROL = r"[\u0000-\u001f\u007f]"  # a title has none
NAME = _whole(ITEM_ID.pattern)


def _text(limit: int, *, one_line: bool = False) -> JSON:
    """A string with something in it, at most `limit` characters."""
    patterns = [{"pattern": SOMETHING}] + ([{"not": {"pattern": CONTROL}}] if one_line else [])
    return {"type": "string", "minLength": 1, "maxLength": limit, "allOf": patterns}


def plan_schema(limits: PlanLimits, base_url: str) -> JSON:
    text = _text(MAX_COMMAND_CHARS)
    timeout: JSON = {"type": "integer", "minimum": 1, "maximum": limits.max_verify_timeout_s}
    command = {
        "description": "A shell command (bash -c) run in the task's git workspace, or the "
        "command with its own timeout.",
        "oneOf": [
            text,
            {
                "type": "object",
                "required": ["command"],
                "additionalProperties": False,
                "properties": {"command": text, "timeoutS": timeout},
            },
        ],
    }
    check = {
        "description": "A check: a command, or the command with its timeout and whether it "
        "only reads the workspace (independent: re-verification may run it beside others).",
        "oneOf": [
            text,
            {
                "type": "object",
                "required": ["command"],
                "additionalProperties": False,
                "properties": {
                    "command": text,
                    "timeoutS": timeout,
                    "independent": {"type": "boolean", "default": False},
                },
            },
        ],
    }
    peer_name: dict[str, Any] = {"type": "string"}
    if limits.peers:
        peer_name["enum"] = sorted(limits.peers)
    fact = {
        "type": "object",
        "required": ["key", "check"],
        "additionalProperties": False,
        "properties": {
            "key": {"type": "string", "pattern": NAME},
            "check": {**text, "description": "A command; its output is the fact's value."},
            "maxAgeS": {"type": "integer", "minimum": 1, "maximum": MAX_EXPIRES_S, "default": 3600},
        },
    }
    item = {
        "type": "object",
        "required": ["id"],
        "anyOf": [{"required": ["verify"]}, {"required": ["ask"]}],
        "allOf": [
            {"not": {"required": ["ask", "run"]}},
            {"not": {"required": ["delegateTo", "run"]}},
            {"not": {"required": ["delegateTo", "ask"]}},
        ],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": NAME, "not": {"enum": sorted(RESERVED_IDS)}},
            "title": _text(MAX_TITLE_CHARS, one_line=True),
            "run": {
                "$ref": "#/$defs/command",
                "description": "Does the item's work; without it the model works the item.",
            },
            "verify": {
                "$ref": "#/$defs/check",
                "description": "Exit code 0 marks the item done; the harness runs it (before "
                "the work, to see it fail; after it; and again at the end, to catch "
                "regressions).",
            },
            "maxAttempts": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_ATTEMPTS_CAP,
                "default": limits.default_max_attempts,
            },
            "timeoutS": {
                "type": "integer",
                "minimum": 1,
                "maximum": limits.max_item_timeout_s,
                "description": "Seconds the whole item (all its attempts) may take.",
            },
            "irreversible": {
                "type": "boolean",
                "default": False,
                "description": "A person approves before the item's work runs.",
            },
            "precheck": {
                "type": "boolean",
                "default": True,
                "description": "Run verify once before the work: a check that already passes "
                "cannot tell done from not done (policy onWeakCheck). false: the check needs "
                "the work's output to run at all.",
            },
            "ask": {
                **_text(MAX_ASK_CHARS),
                "description": "A question for a person: the answer is the item's work "
                "(kept in answers/<id>.md; verify defaults to `test -s answers/<id>.md`).",
            },
            "delegateTo": {
                "description": "A peer A2A agent does the item's work (one the server lists "
                "in A2A_AGENT_PEERS): its name, or {peer, plan} with the plan the peer is sent. "
                "Its report lands in delegated/<id>.md, its diff is applied, and this item's "
                "verify still decides.",
                "oneOf": [
                    peer_name,
                    {
                        "type": "object",
                        "required": ["peer"],
                        "additionalProperties": False,
                        "properties": {
                            "peer": peer_name,
                            "plan": {"type": "object", "required": ["goal", "items"]},
                        },
                    },
                ],
            },
            "facts": {
                "type": "array",
                "maxItems": MAX_FACTS,
                "items": fact,
                "description": "Once the item is verified each check runs and its output is "
                "the fact's value (keys unique within the item; the server checks).",
            },
        },
    }
    policy = {
        "type": "object",
        "additionalProperties": False,
        "description": 'Where the run stops for a person (also a DataPart {"policy": ...}).',
        "properties": {
            "reviewPlan": {
                "type": "boolean",
                "description": "A plan drafted by the model waits for approval first.",
            },
            "onItemFailure": {
                "enum": list(ON_ITEM_FAILURE),
                "description": "Default: the card's policyDefaults.onItemFailure.",
            },
            "budgetPause": {
                "type": "boolean",
                "description": "Wait for approval at the budget's pause point.",
            },
            "approvalExpiresS": {"type": "integer", "minimum": 1, "maximum": MAX_EXPIRES_S},
            "approvePublish": {
                "type": "boolean",
                "default": True,
                "description": "A person approves the push of a publish DataPart first.",
            },
            "onExpiry": {"enum": list(ON_EXPIRY), "default": "reject"},
            "onWeakCheck": {
                "enum": list(ON_WEAK_CHECK),
                "default": "warn",
                "description": "An item whose verify passes before the work: warn (go on, "
                "flagged), ask a person, or refuse (the item fails).",
            },
            "onRegression": {
                "enum": list(ON_REGRESSION),
                "description": "A done item whose verify fails when run again after later "
                "items: reopen it (a new attempt), ask a person, or fail the task. Default: "
                "the card's policyDefaults.onRegression.",
            },
            "reverifyEvery": {
                "type": "integer",
                "minimum": 1,
                "maximum": 10_000,
                "description": "Also run every done item's verify again after every N items "
                "(always after the last).",
            },
        },
    }
    return {
        "$schema": DRAFT,
        "$id": base_url + PLAN_PATH,
        "title": 'a2a-agent plan: the value of a DataPart {"plan": ...}',
        "type": "object",
        "required": ["goal", "items"],
        "additionalProperties": False,
        "properties": {
            "goal": _text(MAX_GOAL_CHARS),
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": limits.max_items,
                "items": {"$ref": "#/$defs/item"},
                "description": "Worked in order. Item ids must be unique (the server checks).",
            },
            "policy": {"$ref": "#/$defs/policy"},
            "verify": {
                "$ref": "#/$defs/command",
                "description": "The plan's acceptance check (an end-to-end check), run after "
                "the last item and after every reopening; completion needs it.",
            },
        },
        "$defs": {"command": command, "check": check, "item": item, "policy": policy},
    }


def budget_schema(caps: Mapping[str, Any], base_url: str) -> JSON:
    def cap(key: str) -> Any:
        return caps.get(key)

    actions_cap = (caps.get("max_actions") or {}).get("*")
    return {
        "$schema": DRAFT,
        "$id": base_url + BUDGET_PATH,
        "title": 'a2a-agent budget: the value of a DataPart {"budget": ...} in a first message',
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "maxUsd": {"type": "number", "exclusiveMinimum": 0, "maximum": cap("max_usd")},
            "maxTokens": {"type": "integer", "minimum": 1, "maximum": cap("max_tokens")},
            "maxWallS": {
                "type": "integer",
                "minimum": 1,
                "maximum": cap("max_wall_s"),
                "description": "Seconds of work since submission, not counting time spent "
                "waiting for a person.",
            },
            "maxStepsWithoutProgress": {
                "type": "integer",
                "minimum": 1,
                "maximum": cap("max_steps_without_progress"),
            },
            "maxActions": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": MAX_TOOL_LIMITS,
                "propertyNames": {"pattern": _whole(TOOL_NAME.pattern)},
                "description": 'Tool calls per tool name, and "*" for all of them.',
                "additionalProperties": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": actions_cap,
                },
            },
        },
    }


# What sources.py refuses besides REF: ".." anywhere, a ".lock" end (and for a branch, a "/"
# end); and a URL with control characters or a leading "-".
NOT_A_REF = {"not": {"pattern": r"\.\.|\.lock$"}}
NOT_A_BRANCH = {"not": {"pattern": r"\.\.|\.lock$|/$"}}
URL: JSON = {
    "type": "string",
    "minLength": 1,
    "allOf": [{"pattern": SOMETHING}, {"not": {"pattern": "^-|[\u0000-\u001f]"}}],
}


def workspace_schema(base_url: str) -> JSON:
    git = {
        "type": "object",
        "required": ["url"],
        "additionalProperties": False,
        "properties": {
            "url": {
                **URL,
                "description": "https:// (a public host), or a URL the server lists "
                "(A2A_AGENT_GIT_ALLOWED_URLS; the only way to file://).",
            },
            "ref": {"type": "string", "pattern": SOURCE_REF, **NOT_A_REF, "default": "HEAD"},
            "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH},
            "credential": {
                "type": "string",
                "description": "The name of a credential the server holds; never a secret.",
            },
        },
    }
    return {
        "$schema": DRAFT,
        "$id": base_url + WORKSPACE_PATH,
        "title": 'a2a-agent workspace: the value of a DataPart {"workspace": ...} in a first '
        "message (files instead travel as FileParts: single files, or tar/zip archives)",
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": {
            "git": {**git, "description": "Clone this repository at `ref` first."},
            "fromTask": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "pattern": SOMETHING,
                "description": "Start from the final state of an earlier task of yours.",
            },
        },
    }


def publish_schema(base_url: str) -> JSON:
    return {
        "$schema": DRAFT,
        "$id": base_url + PUBLISH_PATH,
        "title": 'a2a-agent publish: the value of a DataPart {"publish": ...}; once every check '
        "passed the task's commits are pushed to this branch (after approval unless the "
        "policy's approvePublish is false; never forced)",
        "type": "object",
        "required": ["git"],
        "additionalProperties": False,
        "properties": {
            "git": {
                "type": "object",
                "required": ["url", "branch"],
                "additionalProperties": False,
                "properties": {
                    "url": URL,
                    "branch": {"type": "string", "pattern": SOURCE_REF, **NOT_A_BRANCH},
                    "credential": {"type": "string"},
                },
            }
        },
    }
