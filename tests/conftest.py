"""Real PostgreSQL for every test: DATABASE_URL's server, or an embedded one.

Each test gets its own database, cloned from a template that already holds our schema and
the engine's, so no test depends on another's leftovers.
"""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from dbos import run_dbos_database_migrations
from psycopg import sql
from psycopg.conninfo import make_conninfo

from a2a_agent.database import embedded_server_uri, sqlalchemy_url
from persistence.db import Pool, create_pool
from persistence.migrate import migrate
from tests.support.db import close_all
from tests.support.fake_anthropic import FakeAnthropic
from tests.support.here import ServerHere, here_is_taken
from tests.support.peers import StartPeer, peer_starter, webhook_peer
from tests.support.processes import LOGS, SUITE_ENV, AgentProcess, StartAgent, agent_env
from tests.support.secrets import KNOWN_SECRETS


@pytest.fixture(autouse=True)
def tests_own_connections() -> Iterator[None]:
    """The connections the test's polls kept open (tests/support/db.py), closed at its end."""
    yield
    close_all()


@pytest.fixture(scope="session", autouse=True)
def no_secret_in_any_log() -> Iterator[None]:
    """After the whole session: no process's log holds a secret the suite gave the service
    (model keys, API keys, push tokens and credentials)."""
    yield
    found = []
    for log in LOGS:
        text = log.read_text(errors="replace") if log.exists() else ""
        found += [f"{log.name}: {s[:6]}..." for s in KNOWN_SECRETS if s and s in text]
    assert not found, f"secrets in the logs: {found}"


# Four test processes share one PostgreSQL (100 connections): with the default pools a
# process server held up to 21 of them, and the suite peaked at 93.
SUITE_ENV["A2A_AGENT_DB_POOL_MAX"] = "4"


# The server every machine of this project runs (trust auth); the tests make their own
# databases on it and drop them.
MACHINE_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# One run's databases share a prefix: the first process's id, which the xdist workers it
# starts inherit. The run's last hook drops them all (`pytest_unconfigure`), and no other's.
RUN = os.environ.setdefault("A2A_TEST_RUN", uuid.uuid4().hex[:8])
DATABASES = f"a2a_t_{RUN}_"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


@pytest.fixture(scope="session")
def pg_admin_url() -> str:
    """DATABASE_URL's server; else the machine's PostgreSQL on 127.0.0.1:5432; else an
    embedded server of this run's own (never one a killed earlier run left to recover)."""
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    if _answers(MACHINE_SERVER):
        return MACHINE_SERVER
    root = Path(f"/tmp/a2a-agent-tests-{os.getuid()}")
    root.mkdir(parents=True, exist_ok=True)
    # All processes of one run (pytest-xdist) share its id; the first starts the server.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)[:12]
    with (root / "start.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for old in root.glob("run-*"):
            if old.name != f"run-{run}" and not (old / "pgdata" / "postmaster.pid").exists():
                shutil.rmtree(old, ignore_errors=True)
        return embedded_server_uri(root / f"run-{run}" / "pgdata")


def _create_db(admin_url: str, name: str, template: str | None = None) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        if template:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template)
                )
            )
        else:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(admin_url, dbname=name)


@pytest.fixture(scope="session")
def make_database(pg_admin_url: str) -> Callable[[str | None], str]:
    """A factory of empty databases, named for this run and dropped after it
    (`pytest_unconfigure`)."""

    def make(template: str | None = None) -> str:
        name = f"{DATABASES}{uuid.uuid4().hex[:12]}"
        return _create_db(pg_admin_url, name, template)

    return make


@pytest.fixture(scope="session")
def template_db(pg_admin_url: str) -> str:
    import asyncio  # noqa: PLC0415

    name = f"{DATABASES}tpl_{uuid.uuid4().hex[:12]}"
    url = _create_db(pg_admin_url, name)
    asyncio.run(migrate(url))
    run_dbos_database_migrations(sqlalchemy_url(url))
    return name


@pytest.fixture
def database_url(make_database: Callable[[str | None], str], template_db: str) -> str:
    """A fresh database with the current schema, for one test."""
    return make_database(template_db)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[Pool]:
    """A connection pool on the test's database, as the service opens it."""
    pool = create_pool(database_url, max_size=4)
    await pool.open(wait=True)
    try:
        yield pool
    finally:
        await pool.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def _process_only(name: str) -> bool:
    """Settings a process applies before the app is built (crash points, log set-up, the
    tracer, the forked push deliverer): a server given one of them is a process."""
    return name in PROCESS_ONLY or name.startswith("OTEL_")


PROCESS_ONLY = {
    "A2A_AGENT_FAULT_FILE",
    "A2A_AGENT_LOG_FORMAT",
    "A2A_AGENT_LOG_LEVEL",
    "A2A_AGENT_PUSH_DELIVERY",
}


def _here(
    request: pytest.FixtureRequest, role: str, args: tuple[str, ...], env: dict[str, str]
) -> bool:
    """Whether this `serve` can run in the test's process (see tests/support/here.py): not
    for a test marked `processes`, one that plants a crash, or a second server."""
    return (
        not os.environ.get("A2A_TEST_PROCESSES_ONLY")  # the suite as it ran before, to compare
        and role == "serve"
        and not args
        and not any(_process_only(name) for name in env)
        and request.node.get_closest_marker("processes") is None
        and not here_is_taken()
    )


@pytest.fixture
def start_agent(
    request: pytest.FixtureRequest, database_url: str, home: Path
) -> Iterator[StartAgent]:
    """Start servers on one database: `serve` in this process where it can (the same app,
    engine and HTTP, without a Python start-up), else real a2a-agent processes; all are
    stopped (processes killed) at the end."""
    started: list[AgentProcess] = []

    def start(
        role: str = "serve", executor_id: str | None = None, *args: str, **env: str
    ) -> AgentProcess:
        name = executor_id or f"{role}-{len(started) + 1}"
        server: AgentProcess
        if _here(request, role, args, env):
            server = ServerHere(
                database_url=database_url,
                home=home,
                executor_id=name,
                env=agent_env(database_url, home, name, env=env),
            )
            LOGS.append(server.log_path)
        else:
            server = AgentProcess(
                role=role,
                database_url=database_url,
                home=home,
                executor_id=name,
                extra_args=args,
                env=env,
            )
        started.append(server)
        return server.start()

    yield start
    for server in started:
        if isinstance(server, ServerHere):
            server.close()
        else:
            server.kill()


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A fake Anthropic Messages API on loopback, scripted by the test."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def start_peer(
    make_database: Callable[[str | None], str], template_db: str, tmp_path: Path
) -> Iterator[StartPeer]:
    """Second instances of this service as peers, each on a database of its own."""
    yield from peer_starter(make_database, template_db, tmp_path)


@pytest.fixture(scope="module")
def module_place(
    make_database: Callable[[str | None], str],
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, Path]:
    """A database and a home for a server the tests of one module share."""
    return make_database(template_db), tmp_path_factory.mktemp("home")


@pytest.fixture
def peer(start_peer: StartPeer) -> AgentProcess:
    return webhook_peer(start_peer)


# Fixtures that put a whole server (or a browser) under a test: its tier is "served" at the
# least (processes, when it also needs them), and `make test-fast` leaves it out.
SERVING = frozenset({"start_agent", "start_peer", "browser"})


def _tier(item: pytest.Item) -> int:
    """0: processes, crashes, other projects' clients (the longest tests); 1: served; 2: the
    rest."""
    if any(item.get_closest_marker(name) for name in ("slow", "processes", "clients")):
        return 0
    return 1 if item.get_closest_marker("served") else 2


# The longest tests as measured (`--durations`, warm caches, 2 cores), so that each worker
# starts on its share of them; a test not named here is guessed from its tier. Only the order
# of the tests depends on these figures.
LONGEST = {
    "tests/test_many_runs.py::test_two_hundred": 64.0,
    "tests/test_chaos.py::test_sigkill_storm": 60.0,
    "tests/test_wheel.py::": 45.0,
    "tests/clients/test_adk.py::test_adk_remote_agent": 39.0,
    "tests/test_delegation_retries.py::test_an_answer_for_a_peer_that_is_down": 32.0,
    "tests/test_budget.py::test_alert_once_and_ledger_exact_across_a_kill": 28.0,
    "tests/test_liveness.py::test_alive_follows_the_loop": 25.0,
    "tests/clients/test_strands.py::test_strands_stream_outlives": 25.0,
    "tests/clients/test_adk.py::test_adk_stream_outlives": 24.0,
    "tests/test_crash.py::test_sigterm_drains": 22.0,
    "tests/test_sources.py::test_kill9_during_a_large_clone": 21.0,
}


def _weight(item: pytest.Item) -> float:
    """A test's seconds: as measured for the longest, else guessed from its tier (slow tests
    about 15 s, process and client tests 8, a served test 2, the rest a fraction of one)."""
    for prefix, seconds in LONGEST.items():
        if item.nodeid.startswith(prefix):
            return seconds
    if item.get_closest_marker("slow"):
        return 15.0
    return (8.0, 2.0, 0.3)[_tier(item)]


def _chunks(n: int, workers: int) -> list[int]:
    """The sizes of the first hand-out of `pytest-xdist --dist worksteal`: each idle worker
    in turn is sent len(pending) // (workers left) tests from the front of the queue."""
    sizes, left = [], n
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def _spread(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """Order the tests so that each worker's first hand-out starts with its share of the
    long ones, longest first. Whole modules go to one worker (their module-scoped servers
    are made once), the longest to the least loaded; the short tests fill each hand-out to
    its size, and work stealing (which takes from the end of a queue) evens out the rest."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        # A slow test is a group of its own (each starts its own processes): the two
        # halves of the kill storm go to two workers.
        slow = item.get_closest_marker("slow") is not None
        modules.setdefault(item.nodeid if slow else item.nodeid.split("::")[0], []).append(item)
    sizes = _chunks(len(items), workers)
    chunks: list[list[pytest.Item]] = [[] for _ in sizes]
    load = [0.0] * workers
    long = [m for m in modules.values() if any(_tier(i) < 2 for i in m)]
    long.sort(key=lambda m: -sum(map(_weight, m)))
    rest = [i for m in modules.values() if not any(m is x for x in long) for i in m]
    for module in long:
        fits = [w for w in range(workers) if len(chunks[w]) + len(module) <= sizes[w]]
        w = min(fits or range(workers), key=lambda k: load[k])
        chunks[w] += module
        load[w] += sum(map(_weight, module))
    for w in range(workers):
        while len(chunks[w]) < sizes[w] and rest:
            chunks[w].append(rest.pop(0))
    chunks[-1] += rest
    return [item for chunk in chunks for item in chunk]


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the run (in its first process, once every xdist worker has ended): its databases
    dropped by a process of their own that nobody waits for (`support/drop_databases.py` says
    why). An embedded server of the run's own is not asked: the next run removes its data."""
    if hasattr(config, "workerinput"):
        return
    admin = os.environ.get("DATABASE_URL") or (MACHINE_SERVER if _answers(MACHINE_SERVER) else None)
    if admin is None:
        return
    command = [sys.executable, "-m", "tests.support.drop_databases", admin, DATABASES]
    # The shell starts it in the background and returns: no child of ours is left running.
    subprocess.run(
        ["sh", "-c", '"$@" >/dev/null 2>&1 &', "sh", *command],
        cwd=Path(__file__).resolve().parents[1],
        check=True,
        start_new_session=True,
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """What is imported and collected by now lives to the end of the session: out of the
    collector's sight (`gc.freeze`), a full collection (an in-process server's close asks for
    one; Python makes others as objects pile up) scans what the tests made, not the 200,000
    objects of every module loaded: 130 ms a collection before, under 1 ms after."""
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVING & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.served)
    # The longest tests first: the test processes start on them while the short ones fill
    # in around them, instead of one 2-minute test starting last and running alone. A
    # module keeps its order and stays whole (its module-scoped servers are made once).
    first: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        first[module] = min(first.get(module, 2), _tier(item))
    order = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda item: (first[item.nodeid.split("::")[0]], order[id(item)]))
    # Under xdist every worker collects and orders alike; spread the long modules over the
    # workers' first hand-outs, instead of one worker starting with all of them.
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers > 1:
        items[:] = _spread(items, workers)
