"""The a2a-sdk 1.3 reference server, built the SDK's documented way, for bench/throughput.py.

`DefaultRequestHandler` + a trivial `AgentExecutor` + `InMemoryTaskStore` (default) or the SDK's
SQLAlchemy `DatabaseTaskStore` (`--store postgres --database-url ...`), JSON-RPC at `/`, the card
at `/.well-known/agent-card.json`, served by uvicorn. `GET /readyz` answers 200 once the store is
initialised (so the benchmark can wait for it the same way as for our server).

The executor does what ours does for a `returnImmediately` SendMessage: it creates the task (the
first event is a `Task` from `new_task_from_user_message`), publishes a working status update
and returns at once. With `--complete` it also marks the task completed before returning.

    python bench/reference_server.py --port 8101
    python bench/reference_server.py --port 8102 --store postgres \\
        --database-url postgresql+asyncpg://root@127.0.0.1:5432/bench

The SDK's documented Postgres driver is asyncpg (`a2a-sdk[postgresql]`); SQLAlchemy's psycopg 3
async dialect (`postgresql+psycopg://`) also works. A plain `postgresql://` URL gets asyncpg when
it can be imported, psycopg otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0, TransportProtocol
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route


class BenchExecutor(AgentExecutor):
    """Creates the task, marks it working and returns (optionally completes it first)."""

    def __init__(self, *, complete: bool = False) -> None:
        self.complete = complete

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            if context.message is None:
                raise ValueError("no message in the request")
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        if self.complete:
            await updater.update_status(TaskState.TASK_STATE_COMPLETED)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.task_id and context.context_id:
            await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def build_card(url: str) -> AgentCard:
    return AgentCard(
        name="a2a-sdk reference (bench)",
        description="The a2a-sdk reference server with a trivial executor, for benchmarks.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="bench",
                name="bench",
                description="Creates a task and marks it working.",
                tags=["bench"],
            )
        ],
    )


def async_sqlalchemy_url(url: str) -> str:
    """`postgresql://...` -> an async SQLAlchemy URL (asyncpg if importable, else psycopg)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            driver = "asyncpg" if importlib.util.find_spec("asyncpg") else "psycopg"
            return f"postgresql+{driver}://" + url[len(prefix) :]
    return url


def create_app(store_kind: str, database_url: str | None, url: str, *, complete: bool) -> Starlette:
    task_store: TaskStore
    dispose = None
    initialize = None
    if store_kind == "memory":
        task_store = InMemoryTaskStore()
    else:
        if not database_url:
            raise SystemExit("--store postgres needs --database-url")
        from a2a.server.tasks import DatabaseTaskStore  # noqa: PLC0415  (needs SQLAlchemy)
        from sqlalchemy.ext.asyncio import create_async_engine  # noqa: PLC0415

        engine = create_async_engine(async_sqlalchemy_url(database_url))
        db_store = DatabaseTaskStore(engine)
        task_store, dispose, initialize = db_store, engine.dispose, db_store.initialize

    card = build_card(url)
    handler = DefaultRequestHandler(
        agent_executor=BenchExecutor(complete=complete),
        task_store=task_store,
        agent_card=card,
    )

    async def readyz(request: Request) -> JSONResponse:
        return JSONResponse({"ready": True, "store": store_kind})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if initialize is not None:
            await initialize()
        try:
            yield
        finally:
            await handler.aclose()
            if dispose is not None:
                await dispose()

    routes: list[BaseRoute] = [
        Route("/readyz", readyz, methods=["GET"]),
        *create_agent_card_routes(card),
        # Both bindings at both versions, as ours serves them (0.3 through the SDK's layer).
        *create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True),
        *create_rest_routes(handler, enable_v0_3_compat=True),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8101)
    parser.add_argument("--store", choices=["memory", "postgres"], default="memory")
    parser.add_argument("--database-url", help="PostgreSQL URL for --store postgres")
    parser.add_argument(
        "--complete", action="store_true", help="the executor also completes each task"
    )
    parser.add_argument("--http", choices=["h11", "httptools"], default="h11")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    url = f"http://{args.host}:{args.port}/"
    app = create_app(args.store, args.database_url, url, complete=args.complete)
    store = args.store
    if store == "postgres":
        store += f" ({async_sqlalchemy_url(args.database_url).split('://', 1)[0]})"
    print(f"a2a-sdk reference server on {url} (store: {store})", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", http=args.http)


if __name__ == "__main__":
    main()
