"""The agent card as this server fills it in, and the schemas it points to.

The static text is the repository's agent_card.json; here it gets the interfaces' URLs and an
extension whose params say what this server takes: the JSON Schemas of the plan and budget
DataParts (served at stable URLs), whether a model is configured, and the limits.
"""

from __future__ import annotations

import json
from typing import Any, cast
from urllib.parse import urlsplit

from a2a.types.a2a_pb2 import AgentCard, AgentExtension, AgentInterface
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from a2a.utils.signing import ProtectedHeader, create_agent_card_signer
from google.protobuf.json_format import ParseDict
from google.protobuf.struct_pb2 import Struct
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from a2a_agent.delivery.signing import Signer
from a2a_agent.edge.intake import FILE_MODES, INPUT_MODES
from a2a_agent.edge.long_poll import EXTENSION_URI as GENERATION_URI
from a2a_agent.edge.long_poll import MAX_WAIT_S as LONG_POLL_MAX_S
from a2a_agent.edge.schemas import (
    BUDGET_PATH,
    EXTENSION_URI,
    PLAN_PATH,
    PUBLISH_PATH,
    WORKSPACE_PATH,
    budget_schema,
    plan_schema,
    publish_schema,
    workspace_schema,
)
from a2a_agent.errors import ConfigError
from a2a_agent.plans import MAX_ATTEMPTS_CAP, PlanLimits
from a2a_agent.settings import Settings
from a2a_agent.wire import to_wire

CACHE_CONTROL = "public, max-age=300"
JWKS_PATH = "/.well-known/jwks.json"
NO_MODEL = " Not available on this server: it has no model configured (ANTHROPIC_API_KEY)."


def provide_by(card: AgentCard, organization: str | None, url: str | None) -> None:
    """The card's provider: the deployment's operator, as A2A_AGENT_PROVIDER_ORGANIZATION and
    A2A_AGENT_PROVIDER_URL name it (over any in the card file); A2A's AgentProvider needs both."""
    if not organization and not url:
        return
    if not organization or not url:
        raise ConfigError(
            "the agent card's provider needs both A2A_AGENT_PROVIDER_ORGANIZATION and "
            "A2A_AGENT_PROVIDER_URL (who runs this deployment, and its web page); set both, "
            "or neither for a card without a provider"
        )
    if urlsplit(url).scheme not in ("http", "https"):
        raise ConfigError(f"A2A_AGENT_PROVIDER_URL must be an http(s) URL; got {url!r}")
    card.provider.organization = organization
    card.provider.url = url


def load_card(
    settings: Settings, limits: PlanLimits, *, model_configured: bool, jsonrpc_path: str
) -> AgentCard:
    try:
        data = json.loads(settings.server.agent_card_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the agent card {settings.server.agent_card_path}: {exc}"
        ) from exc
    card = cast(AgentCard, ParseDict(data, AgentCard()))
    provide_by(card, settings.server.provider_organization, settings.server.provider_url)
    if (
        settings.server.insecure_open
    ):  # the card says what the server enforces, and it enforces none
        card.security_schemes.clear()
        del card.security_requirements[:]
    base = settings.server.url.rstrip("/")
    # What the intake takes, from the intake's own lists (a part of another type gets
    # ContentTypeNotSupportedError).
    del card.default_input_modes[:]
    card.default_input_modes.extend([*INPUT_MODES, *FILE_MODES])
    card.supported_interfaces.extend(
        [
            AgentInterface(
                url=base + jsonrpc_path,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=base,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            # The same endpoints speak A2A 0.3 to a request without `A2A-Version` (the SDK's
            # compatibility layer): the served card then carries 0.3's `url`,
            # `preferredTransport` and `protocolVersion`, which 0.3 clients read.
            AgentInterface(
                url=base + jsonrpc_path,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
            AgentInterface(
                url=base,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
        ]
    )
    params = Struct()
    params.update(
        {
            "planSchema": base + PLAN_PATH,
            "budgetSchema": base + BUDGET_PATH,
            "workspaceSchema": base + WORKSPACE_PATH,
            "publishSchema": base + PUBLISH_PATH,
            "modelConfigured": model_configured,
            "model": settings.model.name if model_configured else "",
            "limits": {
                "maxPlanItems": limits.max_items,
                "maxMessageBytes": settings.intake.max_message_bytes,
                "commandTimeoutS": settings.commands.timeout_s,
                "defaultVerifyTimeoutS": limits.default_verify_timeout_s,
                "defaultMaxAttempts": limits.default_max_attempts,
                "maxAttempts": MAX_ATTEMPTS_CAP,
                "maxItemTimeoutS": limits.max_item_timeout_s,
                "maxInputBytes": settings.intake.max_input_bytes,
                "maxInputFiles": settings.intake.max_input_files,
                "inlineOutputBytes": settings.intake.inline_output_bytes,
            },
            "gitCredentials": sorted(settings.commands.git_credentials),
            "budgetDefaults": to_wire(dict(settings.budget.defaults)),
            "budgetCaps": to_wire(dict(settings.budget.caps)),
            "policyDefaults": {
                "onItemFailure": settings.policy.on_item_failure,
                "budgetPause": settings.policy.budget_pause,
                "budgetPausePct": settings.budget.pause_pct,
                "approvalExpiresS": settings.policy.approval_expires_s,
                "onExpiry": "reject",
                "onWeakCheck": "warn",
                "onRegression": settings.policy.on_regression,
            },
            "keys": "camelCase in every data part and in metadata; plan and budget input may "
            "also use snake_case",
        }
    )
    card.capabilities.extensions.append(
        AgentExtension(
            uri=EXTENSION_URI,
            description="Plans of items each with a verify command, budgets, and what this "
            "server takes: schemas of the plan and budget DataParts, the model, the limits.",
            required=False,
            params=params,
        )
    )
    waits = Struct()
    waits.update({"maxWaitMs": int(LONG_POLL_MAX_S * 1000)})
    card.capabilities.extensions.append(
        AgentExtension(
            uri=GENERATION_URI,
            description="Generations and long polls: every task event carries its generation "
            "(metadata.generation), GetTask's task carries the current one; a GetTask with "
            "currentGeneration (and timeoutMs) answers when the task moves past it, has "
            "ended, or the wait ends; a follow-up message with metadata.ifGenerationMatch is "
            "refused if the task has moved on since.",
            required=False,
            params=waits,
        )
    )
    if not model_configured:
        for skill in card.skills:
            if "model" in skill.tags or skill.id == "work-goal":
                skill.description += NO_MODEL
    return card


def tool_schemas(settings: Settings, limits: PlanLimits) -> dict[str, Any]:
    """The schemas of what a message's DataPart takes, by its key (as /schemas serves them)."""
    base = settings.server.url.rstrip("/")
    return {
        "plan": plan_schema(limits, base),
        "budget": budget_schema(settings.budget.caps, base),
        "workspace": workspace_schema(base),
        "publish": publish_schema(base),
    }


def schema_routes(settings: Settings, limits: PlanLimits) -> list[BaseRoute]:
    by_key = tool_schemas(settings, limits)
    schemas: dict[str, Any] = {
        PLAN_PATH: by_key["plan"],
        BUDGET_PATH: by_key["budget"],
        WORKSPACE_PATH: by_key["workspace"],
        PUBLISH_PATH: by_key["publish"],
    }

    async def serve(request: Request) -> JSONResponse:
        return JSONResponse(
            schemas[request.url.path],
            media_type="application/schema+json",
            headers={"Cache-Control": CACHE_CONTROL},
        )

    return [Route(path, serve, methods=["GET"]) for path in schemas]


class CardSigner:
    """Signs the served card (A2A 1.0: a JWS over the card's JCS form, by the SDK's signer)
    with the deployment's signing key, the one push notifications are signed with; its public
    half is in /.well-known/jwks.json, which the signature's `jku` names. The SDK's card route
    calls this for every request; ES256 signs differently each time, so a card is signed once
    per key and the signed copy kept."""

    def __init__(self, signer: Signer, jwks_url: str) -> None:
        self.signer = signer
        self.jwks_url = jwks_url
        self._signed: tuple[str, AgentCard] | None = None

    async def __call__(self, card: AgentCard) -> AgentCard:
        kid, key = self.signer.current_key()
        if self._signed is None or self._signed[0] != kid:
            header: ProtectedHeader = {
                "kid": kid,
                "alg": "ES256",
                "jku": self.jwks_url,
                "typ": "JOSE",
            }
            signed = AgentCard()
            signed.CopyFrom(card)  # the SDK's signer appends to the card it is given
            create_agent_card_signer(key, header)(signed)  # type: ignore[arg-type]
            self._signed = (kid, signed)
        return self._signed[1]
