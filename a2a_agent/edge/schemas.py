"""JSON Schemas of what a caller sends in DataParts: the plan and the budget.

Made from this server's own limits (items per plan, timeouts, budget caps) and served at
stable URLs, which the agent card names (`plan_extension`). The harness's own validation
(`a2a_agent/plans.py`, `a2a_agent/budget.py`) stays the authority; the schemas say the same
in a form an orchestrator can check before it sends (tests keep the two in step).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from a2a_agent.plans import (
    ITEM_ID,
    MAX_ATTEMPTS_CAP,
    MAX_EXPIRES_S,
    ON_EXPIRY,
    ON_ITEM_FAILURE,
    ON_REGRESSION,
    ON_WEAK_CHECK,
    PlanLimits,
)
from a2a_agent.sources import MAX_DEPTH, REF

JSON = dict[str, Any]
DRAFT = "https://json-schema.org/draft/2020-12/schema"
PLAN_PATH = "/schemas/plan.v1.json"
BUDGET_PATH = "/schemas/budget.v1.json"
WORKSPACE_PATH = "/schemas/workspace.v1.json"
PUBLISH_PATH = "/schemas/publish.v1.json"
SOURCE_REF = REF.pattern
EXTENSION_URI = "https://github.com/a2a-agent/a2a-agent/extensions/verified-plan/v1"


def plan_schema(limits: PlanLimits, base_url: str) -> JSON:
    text: JSON = {"type": "string", "minLength": 1}
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
    item = {
        "type": "object",
        "required": ["id"],
        "anyOf": [{"required": ["verify"]}, {"required": ["ask"]}],
        "not": {"required": ["ask", "run"]},
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string", "pattern": f"^{ITEM_ID.pattern.strip('^$')}$"},
            "title": {"type": "string", "minLength": 1},
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
                "type": "string",
                "minLength": 1,
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
                        "properties": {"peer": peer_name, "plan": {"type": "object"}},
                    },
                ],
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
            "goal": {"type": "string", "minLength": 1, "pattern": r"\S"},
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
                "description": 'Tool calls per tool name, and "*" for all of them.',
                "additionalProperties": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": actions_cap,
                },
            },
        },
    }


def workspace_schema(base_url: str) -> JSON:
    git = {
        "type": "object",
        "required": ["url"],
        "additionalProperties": False,
        "properties": {
            "url": {
                "type": "string",
                "minLength": 1,
                "description": "https:// (a public host), or a URL the server lists "
                "(A2A_AGENT_GIT_ALLOWED_URLS; the only way to file://).",
            },
            "ref": {"type": "string", "pattern": SOURCE_REF, "default": "HEAD"},
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
                    "url": {"type": "string", "minLength": 1},
                    "branch": {"type": "string", "pattern": SOURCE_REF},
                    "credential": {"type": "string"},
                },
            }
        },
    }
