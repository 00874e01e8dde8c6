"""The app factory: one function builds the Starlette app and everything behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route
from starlette.types import Message, Receive, Scope, Send

from a2a_agent.edge.auth import KeyVerifier, RequireKey
from a2a_agent.edge.card import (
    CACHE_CONTROL,
    JWKS_PATH,
    CardSigner,
    load_card,
    schema_routes,
    tool_schemas,
)
from a2a_agent.edge.fast_reads import FastReads
from a2a_agent.edge.fast_sends import FastSends
from a2a_agent.edge.files import file_routes
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.intake import Intake, SmallestCall
from a2a_agent.edge.long_poll import LongPoll
from a2a_agent.edge.not_routed import not_routed_handler
from a2a_agent.edge.peer_hooks import PEER_NOTIFY_PREFIX, peer_routes
from a2a_agent.edge.request_checks import RequestLimits, StrictContentType, TrustedHosts
from a2a_agent.edge.rest_versions import with_version_hints
from a2a_agent.edge.streams import ResumableStreams
from a2a_agent.edge.workspace_intake import SourceIntake
from a2a_agent.engine import LaunchedEngine
from a2a_agent.errors import AgentError
from a2a_agent.harness.workspace.unpack import Limits
from a2a_agent.mcp_door.doorway import Door, Doorway
from a2a_agent.observe.metrics import metrics_route
from a2a_agent.runtime import Runtime, plan_limits, source_rules
from a2a_agent.settings import Settings
from a2a_agent.ui.routes import Dashboard
from persistence.errors import StoreError
from persistence.metrics import PostgresMetricsStore
from persistence.operator import PostgresOperatorStore

JSONRPC_PATH = "/"


def create_app(
    settings: Settings,
    conninfo: str,
    *,
    engine: Callable[[Runtime], LaunchedEngine] | None = None,
    started: Callable[[], None] | None = None,
) -> Starlette:
    """The app and everything behind it; nothing global happens until its lifespan starts.
    `engine` replaces DBOS (the in-process tests give a recording fake); `started` is called
    once the lifespan has started everything (`serve` says where it serves only then)."""
    runtime = Runtime(settings, conninfo, role="serve", engine=engine)
    handler = AgentRequestHandler(
        store=runtime.store,
        replies=runtime.replies,
        push=runtime.push,
        allow=runtime.allow,
        engine=runtime.engine,
        notifier=runtime.notifier,
        intake=Intake(
            limits=plan_limits(settings),
            max_message_bytes=settings.intake.max_message_bytes,
            model_available=runtime.model is not None,
            budget_defaults=settings.budget.defaults,
            budget_caps=settings.budget.caps,
            sources=SourceIntake(
                rules=source_rules(settings),
                unpack=Limits(settings.intake.max_input_files, settings.intake.max_unpacked_bytes),
                max_input_bytes=settings.intake.max_input_bytes,
                public_url=settings.server.url,
            ),
            policy_defaults=settings.policy.defaults(),
            max_active_tasks=settings.intake.max_active_tasks,
            smallest_call=SmallestCall(
                model=settings.model.name,
                output_tokens=min(settings.model.min_tokens, settings.model.max_tokens),
                prices=settings.budget.prices,
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
            "executor_id": settings.worker.executor_id,
        }
        return JSONResponse(body, status_code=200 if health.ready else 503)

    # The largest request body the door takes (RequestLimits); files travel base64-encoded
    # inside the JSON.
    max_body_bytes = (
        settings.intake.max_message_bytes + settings.intake.max_input_bytes * 4 // 3 + 64 * 1024
    )

    def mcp_door() -> Door:
        from a2a_agent.mcp_door.server import McpDoor  # noqa: PLC0415 (on the first request)

        schemas = tool_schemas(settings, plan_limits(settings))
        return McpDoor(handler, schemas, max_body_bytes=max_body_bytes)

    door = Doorway(mcp_door)

    refusal: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        up = False
        try:
            async with runtime, door.lifespan():
                up = True
                if started is not None:
                    started()
                yield
        except (AgentError, StoreError) as exc:
            if not up:  # a start refused for a reason an operator can act on
                refusal.append(f"a2a-agent cannot start: {exc}")
            raise

    card = load_card(
        settings,
        plan_limits(settings),
        model_configured=runtime.model is not None,
        jsonrpc_path=JSONRPC_PATH,
    )
    verifier = None if settings.server.insecure_open else KeyVerifier(runtime.keys)
    dashboard = Dashboard(
        handler=handler,
        tasks=runtime.store,
        runs=runtime.runs,
        operator=PostgresOperatorStore(runtime.pool),
        push=runtime.push,
        outbox=runtime.push,
        verifier=verifier,
        pause_pct=settings.budget.pause_pct,
        secure_cookie=settings.server.url.startswith("https://"),
    )
    # Our own routes and the card first: the REST routes end in a catch-all /{tenant} mount.
    routes: list[BaseRoute] = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/readyz", readyz, methods=["GET"]),
        Route(JWKS_PATH, jwks, methods=["GET"]),
        *schema_routes(settings, plan_limits(settings)),
        *create_agent_card_routes(
            card,
            card_modifier=CardSigner(runtime.signer, settings.server.url.rstrip("/") + JWKS_PATH),
            cache_control=CACHE_CONTROL,
        ),
        *file_routes(runtime.store),
        *peer_routes(runtime.peer_watch, runtime.secrets.tag),
        *dashboard.routes(),
        *door.routes(),
        metrics_route(PostgresMetricsStore(runtime.pool)),
        *create_jsonrpc_routes(handler, JSONRPC_PATH, enable_v0_3_compat=True),
        *with_version_hints(
            create_rest_routes(handler, enable_v0_3_compat=True), jsonrpc_path=JSONRPC_PATH
        ),
    ]
    # The door, outermost first: the Host check, the key (before anything reads the body),
    # the body's type, the request's limits (which read the body once and hand it on), then
    # the stream ids, the long poll's wait, the short reads and the short send.
    middleware = [
        Middleware(
            TrustedHosts, allowed_hosts=settings.server.host_names, jsonrpc_path=JSONRPC_PATH
        ),
        Middleware(RequireKey, verifier=verifier, jsonrpc_path=JSONRPC_PATH),
        Middleware(StrictContentType, jsonrpc_path=JSONRPC_PATH),
        Middleware(
            RequestLimits,
            max_bytes=max_body_bytes,
            jsonrpc_path=JSONRPC_PATH,
            # A peer's notification is public and reads its token first, then at most 1 MiB.
            unlimited=(PEER_NOTIFY_PREFIX,),
        ),
        Middleware(ResumableStreams, ping_s=settings.server.stream_ping_s),
        Middleware(LongPoll, handler=handler, path=JSONRPC_PATH),
        Middleware(FastReads, handler=handler, path=JSONRPC_PATH),
        Middleware(FastSends, handler=handler, path=JSONRPC_PATH),
    ]
    not_routed = not_routed_handler(JSONRPC_PATH)
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={404: not_routed, 405: not_routed},
    )
    # A path no route takes is told so (not_routed.py), not sent on to the same path with a
    # slash added: the SDK's `/{tenant}/...` routes made every `/anything` a 307 to a 404.
    app.router.redirect_slashes = False
    # uvicorn logs a failed start as the traceback Starlette formats; ours (the database
    # away, the executor id in use) is logged as the sentence that says what to do.
    app.router.lifespan = _said_plainly(app.router.lifespan, refusal)  # type: ignore[method-assign,assignment]
    app.state.runtime = runtime
    app.state.handler = handler  # the short read path's tests wrap it alone
    return app


Lifespan = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]


def _said_plainly(handle: Lifespan, refusal: list[str]) -> Lifespan:
    async def lifespan(scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "lifespan.startup.failed" and refusal:
                message = {"type": message["type"], "message": refusal[-1]}
            await send(message)

        await handle(scope, receive, sending)

    return lifespan
