"""The app factory: one function builds the Starlette app and everything behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from a2a_agent.edge.auth import KeyVerifier, RequireKey
from a2a_agent.edge.card import CACHE_CONTROL, load_card, schema_routes
from a2a_agent.edge.fast_reads import FastGetTask
from a2a_agent.edge.files import file_routes
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.intake import Intake, SmallestCall
from a2a_agent.edge.peer_hooks import peer_routes
from a2a_agent.edge.request_checks import RequestLimits, StrictContentType
from a2a_agent.edge.streams import ResumableStreams
from a2a_agent.edge.workspace_intake import SourceIntake
from a2a_agent.harness.unpack import Limits
from a2a_agent.observe.metrics import metrics_route
from a2a_agent.runtime import Runtime, plan_limits, source_rules
from a2a_agent.settings import Settings
from a2a_agent.ui.routes import Dashboard
from persistence.metrics import PostgresMetricsStore
from persistence.operator import PostgresOperatorStore

JSONRPC_PATH = "/"


def create_app(settings: Settings, conninfo: str) -> Starlette:
    runtime = Runtime(settings, conninfo, role="serve")
    handler = AgentRequestHandler(
        store=runtime.store,
        replies=runtime.replies,
        push=runtime.push,
        allow=runtime.allow,
        engine=runtime.engine,
        notifier=runtime.notifier,
        intake=Intake(
            limits=plan_limits(settings),
            max_message_bytes=settings.max_message_bytes,
            model_available=runtime.model is not None,
            budget_defaults=settings.budget_defaults,
            budget_caps=settings.budget_caps,
            sources=SourceIntake(
                rules=source_rules(settings),
                unpack=Limits(settings.max_input_files, settings.max_unpacked_bytes),
                max_input_bytes=settings.max_input_bytes,
                public_url=settings.url,
            ),
            policy_defaults={
                "on_item_failure": settings.on_item_failure,
                "on_regression": settings.on_regression,
                "budget_pause": settings.budget_pause,
            },
            smallest_call=SmallestCall(
                model=settings.model,
                output_tokens=min(settings.model_min_tokens, settings.model_max_tokens),
                prices=settings.prices,
            ),
        ),
    )

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def jwks(request: Request) -> JSONResponse:
        """The public keys push notifications are signed with (see delivery/signing.py)."""
        return JSONResponse(runtime.signer.jwks(), headers={"Cache-Control": CACHE_CONTROL})

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

    card = load_card(
        settings,
        plan_limits(settings),
        model_configured=runtime.model is not None,
        jsonrpc_path=JSONRPC_PATH,
    )
    verifier = None if settings.insecure_open else KeyVerifier(runtime.keys)
    dashboard = Dashboard(
        handler=handler,
        tasks=runtime.store,
        runs=runtime.runs,
        operator=PostgresOperatorStore(runtime.pool),
        push=runtime.push,
        outbox=runtime.push,
        verifier=verifier,
        pause_pct=settings.budget_pause_pct,
        secure_cookie=settings.url.startswith("https://"),
    )
    # Our own routes and the card first: the REST routes end in a catch-all /{tenant} mount.
    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route("/.well-known/jwks.json", jwks, methods=["GET"]),
        *schema_routes(settings, plan_limits(settings)),
        *create_agent_card_routes(card, cache_control=CACHE_CONTROL),
        *file_routes(runtime.store),
        *peer_routes(runtime.peer_watch, runtime.secrets.tag),
        *dashboard.routes(),
        metrics_route(PostgresMetricsStore(runtime.pool)),
        *create_jsonrpc_routes(handler, JSONRPC_PATH),
        *create_rest_routes(handler),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.runtime = runtime
    app.add_middleware(FastGetTask, handler=handler, path=JSONRPC_PATH)
    app.add_middleware(ResumableStreams)
    # Outermost last: the Host check, the body's type, the key, then the request's limits,
    # before anything reads the request.
    app.add_middleware(RequireKey, verifier=verifier)
    app.add_middleware(
        RequestLimits,
        # Files travel base64-encoded inside the JSON.
        max_bytes=settings.max_message_bytes + settings.max_input_bytes * 4 // 3 + 64 * 1024,
        jsonrpc_path=JSONRPC_PATH,
    )
    app.add_middleware(StrictContentType)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=settings.host_names)
    return app
