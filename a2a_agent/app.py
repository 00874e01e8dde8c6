"""The app factory: one function builds the Starlette app and everything behind it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.types.a2a_pb2 import AgentCard, AgentInterface
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from google.protobuf.json_format import ParseDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from a2a_agent.edge.fast_reads import FastGetTask
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.intake import Intake, SmallestCall
from a2a_agent.errors import ConfigError
from a2a_agent.runtime import Runtime, plan_limits
from a2a_agent.settings import Settings

JSONRPC_PATH = "/"


def load_card(settings: Settings) -> AgentCard:
    try:
        data = json.loads(settings.agent_card_path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the agent card {settings.agent_card_path}: {exc}") from exc
    card = cast(AgentCard, ParseDict(data, AgentCard()))
    base = settings.url.rstrip("/")
    card.supported_interfaces.extend(
        [
            AgentInterface(
                url=base + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
            AgentInterface(
                url=base,
                protocol_binding=TransportProtocol.HTTP_JSON.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            ),
        ]
    )
    return card


def create_app(settings: Settings, conninfo: str) -> Starlette:
    runtime = Runtime(settings, conninfo, role="serve")
    handler = AgentRequestHandler(
        store=runtime.store,
        engine=runtime.engine,
        notifier=runtime.notifier,
        intake=Intake(
            limits=plan_limits(settings),
            max_message_bytes=settings.max_message_bytes,
            model_available=runtime.model is not None,
            budget_defaults=settings.budget_defaults,
            budget_caps=settings.budget_caps,
            smallest_call=SmallestCall(
                model=settings.model,
                output_tokens=min(settings.model_min_tokens, settings.model_max_tokens),
                prices=settings.prices,
            ),
        ),
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> JSONResponse:
        health = await runtime.health()
        body = {
            "ready": health.ready,
            "database": health.database,
            "schema_current": health.schema_current,
            "heartbeat_fresh": health.heartbeat_fresh,
            "executor_id": settings.executor_id,
        }
        return JSONResponse(body, status_code=200 if health.ready else 503)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with runtime:
            yield

    # Our own routes and the card first: the REST routes end in a catch-all /{tenant} mount.
    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        *create_agent_card_routes(load_card(settings)),
        *create_jsonrpc_routes(handler, JSONRPC_PATH),
        *create_rest_routes(handler),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runtime = runtime
    app.add_middleware(FastGetTask, handler=handler, path=JSONRPC_PATH)
    return app
