"""The app in the test's own process: the real edge, stores and PostgreSQL, with a recording
fake in place of the run engine (no DBOS, no worker, no server process). For behaviour of
the door and the handler that needs no run: a task is stored, and what a worker's starter
would enqueue, or the edge asked of the engine (a segment, a cancel), is recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from starlette.applications import Starlette

from a2a_agent.app import create_app
from a2a_agent.runtime import Runtime
from a2a_agent.settings import Settings
from persistence.starts import PostgresStartStore

BASE_URL = "http://127.0.0.1:8000"


@dataclass
class RecordingEngine:
    """A run engine that runs nothing: it remembers what the edge asked of it."""

    started: list[tuple[str, int]] = field(default_factory=list)
    canceled: list[str] = field(default_factory=list)
    launched: bool = False

    async def start(self, task_id: str, segment: int = 0) -> None:
        self.started.append((task_id, segment))

    async def cancel(self, task_id: str) -> None:
        self.canceled.append(task_id)

    async def launch(self) -> None:
        self.launched = True

    async def shutdown(self) -> None:
        self.launched = False


@dataclass
class InProcess:
    http: httpx.AsyncClient
    app: Starlette
    engine: RecordingEngine
    runtime: Runtime

    async def runs_to_start(self) -> list[str]:
        """The tasks whose run a worker's starter would enqueue now, oldest first (read
        through the starter's own query, enqueueing nothing: no workflow is made here)."""
        found: list[str] = []

        async def note(task_id: str) -> None:
            found.append(task_id)

        await PostgresStartStore(self.runtime.pool).start_unstarted(note, 10_000)
        return found


@asynccontextmanager
async def in_process(
    database_url: str, home: Path, env: Mapping[str, str] | None = None
) -> AsyncIterator[InProcess]:
    """The app on `database_url`, its lifespan running, and an HTTP client that calls it in
    process (`BASE_URL`)."""
    settings = Settings.from_env(
        {
            "DATABASE_URL": database_url,
            "A2A_AGENT_HOME": str(home),
            "A2A_AGENT_EXECUTOR_ID": f"in-process-{home.name}",
            "A2A_AGENT_INSECURE_OPEN": "1",
            **(env or {}),
        },
        role="serve",
    ).with_overrides(run_worker=False)
    engine = RecordingEngine()
    app = create_app(settings, database_url, engine=lambda _runtime: engine)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL, timeout=30) as http:
            yield InProcess(http, app, engine, app.state.runtime)
