"""The card tells an orchestrator what this server takes, and the schemas it points to say
the same as the harness's own checks."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from a2a_agent.edge.card import load_card
from a2a_agent.edge.schemas import EXTENSION_URI, plan_schema
from a2a_agent.errors import ConfigError, PlanError
from a2a_agent.plans import parse_plan
from a2a_agent.runtime import plan_limits
from a2a_agent.settings import PACKAGED_CARD, Settings
from a2a_agent.wire import from_wire
from tests.support.fake_anthropic import FakeAnthropic, model_env
from tests.support.processes import AgentProcess, StartAgent
from tests.test_bad_input import BAD_PLANS

README_PLAN = {
    "goal": "Say hello",
    "items": [
        {
            "id": "hello",
            "title": "Write hello.txt",
            "run": "echo hello > hello.txt",
            "verify": "grep -q hello hello.txt",
            "maxAttempts": 2,
        }
    ],
}


def card_of(server: AgentProcess) -> tuple[dict[str, Any], httpx.Response]:
    response = httpx.get(f"{server.url}/.well-known/agent-card.json", timeout=10)
    assert response.status_code == 200
    return response.json(), response


def extension_of(card: dict[str, Any]) -> dict[str, Any]:
    (extension,) = [e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI]
    params: dict[str, Any] = extension["params"]
    return params


def schemas_of(card: dict[str, Any]) -> dict[str, Draft202012Validator]:
    found = {}
    for name in ("planSchema", "budgetSchema", "workspaceSchema", "publishSchema"):
        response = httpx.get(extension_of(card)[name], timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/schema+json")
        schema = response.json()
        Draft202012Validator.check_schema(schema)
        found[name] = Draft202012Validator(schema)
    return found


def test_the_card_says_what_this_server_takes(start_agent: StartAgent) -> None:
    server = start_agent("serve", "card", A2A_AGENT_MAX_PLAN_ITEMS="7")
    card, response = card_of(server)
    assert "max-age=" in response.headers["cache-control"]
    params = extension_of(card)
    assert params["modelConfigured"] is False
    assert params["limits"]["maxPlanItems"] == 7
    assert params["limits"]["maxMessageBytes"] > 0 and params["limits"]["commandTimeoutS"] > 0
    assert params["budgetCaps"]["maxUsd"] > 0 and "stepsWithoutProgress" not in params["keys"]
    work_goal = next(s for s in card["skills"] if s["id"] == "work-goal")
    assert "no model configured" in work_goal["description"]
    # Every JSON example on the card is valid by the schemas it points to.
    validators = schemas_of(card)
    examples = [json.loads(e) for s in card["skills"] for e in s["examples"] if e.startswith("{")]
    assert examples
    for example in examples:
        for key, value in example.items():
            validators[f"{key}Schema"].validate(value)
    schema: Any = validators["planSchema"].schema
    assert schema["properties"]["items"]["maxItems"] == 7


def test_with_a_model_the_card_says_so(start_agent: StartAgent, fake: FakeAnthropic) -> None:
    server = start_agent("serve", "card-model", **model_env(fake))
    card, _ = card_of(server)
    params = extension_of(card)
    assert params["modelConfigured"] is True and params["model"]
    work_goal = next(s for s in card["skills"] if s["id"] == "work-goal")
    assert "no model configured" not in work_goal["description"]


def test_a_plan_valid_by_the_served_schema_is_taken(start_agent: StartAgent) -> None:
    server = start_agent("serve", "card-plan")
    card, _ = card_of(server)
    validators = schemas_of(card)
    validators["planSchema"].validate(README_PLAN)
    validators["budgetSchema"].validate({"maxUsd": 5, "maxActions": {"bash": 200, "*": 1000}})
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "configuration": {"returnImmediately": True},
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"data": {"plan": README_PLAN, "budget": {"maxUsd": 5}}}],
            },
        },
    }
    reply = httpx.post(f"{server.url}/", json=body, headers={"A2A-Version": "1.0"}).json()
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED", reply


@pytest.mark.parametrize(("case", "plan", "expected"), BAD_PLANS, ids=[c[0] for c in BAD_PLANS])
def test_plans_the_harness_refuses_the_schema_refuses(case: str, plan: Any, expected: str) -> None:
    limits = plan_limits(Settings.from_env({}))
    validator = Draft202012Validator(plan_schema(limits, "http://x"))
    # Unique item ids cannot be said in JSON Schema (the schema's description says so).
    assert validator.is_valid(plan) == (case == "duplicate ids"), case
    with pytest.raises(PlanError):
        parse_plan(from_wire(plan, "plan"), limits)
    assert validator.is_valid(README_PLAN)
    parse_plan(from_wire(README_PLAN, "plan"), limits)


CHECKPOINT_PLAN = {
    "goal": "ship",
    "items": [
        {"id": "build", "run": "true", "verify": "true"},
        {"id": "name", "ask": "What is it called?"},
        {"id": "deploy", "run": "true", "verify": "true", "irreversible": True},
    ],
    "policy": {"reviewPlan": True, "onItemFailure": "ask", "approvalExpiresS": 3600},
}
BAD_CHECKPOINTS = [
    ("unknown policy key", {"policy": {"pauseEverywhere": True}}),
    ("bad onItemFailure", {"policy": {"onItemFailure": "retry"}}),
    ("expiry of zero", {"policy": {"approvalExpiresS": 0}}),
    ("irreversible not a flag", {"items": [{"id": "x", "verify": "true", "irreversible": 1}]}),
    ("a question with a run", {"items": [{"id": "x", "ask": "why?", "run": "true"}]}),
    ("neither verify nor ask", {"items": [{"id": "x", "run": "true"}]}),
]


@pytest.mark.parametrize(("case", "change"), BAD_CHECKPOINTS, ids=[c[0] for c in BAD_CHECKPOINTS])
def test_checkpoint_fields_agree_between_schema_and_harness(case: str, change: Any) -> None:
    limits = plan_limits(Settings.from_env({}))
    validator = Draft202012Validator(plan_schema(limits, "http://x"))
    assert validator.is_valid(CHECKPOINT_PLAN)
    parsed = parse_plan(from_wire(CHECKPOINT_PLAN, "plan"), limits)
    assert parsed.policy == {
        "review_plan": True,
        "on_item_failure": "ask",
        "approval_expires_s": 3600,
    }
    assert [i.irreversible for i in parsed.items] == [False, False, True]
    assert parsed.items[1].verify_command == "test -s answers/name.md"
    bad = {**CHECKPOINT_PLAN, **change}
    assert not validator.is_valid(bad), case
    with pytest.raises(PlanError):
        parse_plan(from_wire(bad, "plan"), limits)


def card_with(env: dict[str, str]) -> Any:
    settings = Settings.from_env(env)
    return load_card(settings, plan_limits(settings), model_configured=False, jsonrpc_path="/")


def test_the_provider_is_the_operators_or_none() -> None:
    """The shipped card named `https://example.invalid/a2a-agent` as its provider: a
    made-up organization on every deployment's card."""
    assert "example.invalid" not in PACKAGED_CARD.read_text()
    assert not card_with({}).HasField("provider")
    named = card_with(
        {
            "A2A_AGENT_PROVIDER_ORGANIZATION": "Example Corp",
            "A2A_AGENT_PROVIDER_URL": "https://agents.example.com",
        }
    )
    assert (named.provider.organization, named.provider.url) == (
        "Example Corp",
        "https://agents.example.com",
    )
    with pytest.raises(ConfigError, match="needs both A2A_AGENT_PROVIDER_ORGANIZATION and"):
        card_with({"A2A_AGENT_PROVIDER_ORGANIZATION": "Example Corp"})
    with pytest.raises(ConfigError, match="A2A_AGENT_PROVIDER_URL must be an http"):
        card_with({"A2A_AGENT_PROVIDER_ORGANIZATION": "E", "A2A_AGENT_PROVIDER_URL": "acme"})
