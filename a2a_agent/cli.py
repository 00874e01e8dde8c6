"""`a2a-agent serve | worker | deliver | cluster | migrate | keys | push | ping` (the
service, on its database), and `send | tasks` (a client of a running one, over A2A).
`a2a-agent COMMAND --help` says more."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import ipaddress
import logging
import signal
import socket
import sys
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import uvicorn
from dbos import run_dbos_database_migrations

from a2a_agent import client_commands, ops
from a2a_agent.database import resolve_database_url, sqlalchemy_url
from a2a_agent.delivery.process import run_delivery
from a2a_agent.edge.auth import DEFAULT_SCOPES, SCOPES, new_key
from a2a_agent.errors import AgentError, ConfigError
from a2a_agent.harness.workspace.reaping import reap_on_loops
from a2a_agent.liveness import check_alive
from a2a_agent.nanny import supervise
from a2a_agent.observe import logs
from a2a_agent.runtime import Runtime
from a2a_agent.settings import Settings
from persistence.db import create_pool
from persistence.errors import StoreError
from persistence.keys import PostgresKeyStore
from persistence.migrate import migrate
from persistence.push import PostgresPushStore

PR_SET_DUMPABLE = 4
STARTUP_FAILED = 3  # as uvicorn's own `run` exits when the app cannot start


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="a2a-agent", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the A2A API (and run a worker unless --no-worker)")
    serve.add_argument("--host", help="address to bind (default 127.0.0.1, A2A_AGENT_HOST)")
    serve.add_argument("--port", type=int, help="port (default 8000, A2A_AGENT_PORT)")
    serve.add_argument(
        "--no-worker",
        action="store_true",
        help="API only: accept and answer requests, run no tasks here",
    )
    serve.add_argument(
        "--executor-id",
        help="stable, unique id of this process (A2A_AGENT_EXECUTOR_ID; default <hostname>-serve)",
    )
    worker = sub.add_parser("worker", help="run tasks from the shared database; no API")
    worker.add_argument(
        "--executor-id",
        help="stable, unique id of this process (A2A_AGENT_EXECUTOR_ID; default <hostname>-worker)",
    )
    deliver = sub.add_parser(
        "deliver", help="send push notifications from the shared database; no API, no runs"
    )
    for command in (serve, worker, deliver):
        command.add_argument(
            "--no-supervise",
            action="store_true",
            help="run in this process instead of a forked child that is replaced at once "
            "if it is killed (push notifications are then sent from this process too)",
        )
    sub.add_parser("migrate", help="bring the database schema to the latest version")
    keys = sub.add_parser("keys", help="API keys: create one, list them, revoke one")
    keys_sub = keys.add_subparsers(dest="action", required=True)
    create = keys_sub.add_parser("create", help="make a key (printed once)")
    create.add_argument("--principal", required=True, help="who the key is: owns its tasks")
    create.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        help=f"repeat for each; default {' '.join(DEFAULT_SCOPES)} ('run': plans with run "
        "commands)",
    )
    create.add_argument("--name", default="", help="a note on what the key is for")
    keys_sub.add_parser("list", help="every key: id, principal, scopes, revoked or not")
    revoke = keys_sub.add_parser("revoke", help="stop a key working (within seconds)")
    revoke.add_argument("key_id", help="the key's id (as `keys list` shows it)")
    push = sub.add_parser(
        "push",
        help="push deliveries that gave up: 'dead' lists them, 'retry' starts them again",
        description="A push config is dead once its receiver failed "
        "A2A_AGENT_PUSH_MAX_ATTEMPTS times or for A2A_AGENT_PUSH_MAX_AGE_S: nothing more "
        "is sent to it. Both commands work on the service's database (DATABASE_URL, else "
        "the embedded one in A2A_AGENT_HOME).",
    )
    push_sub = push.add_subparsers(dest="action", required=True)
    push_sub.add_parser(
        "dead",
        help="every dead push config: its task, id and URL, how far it got, its last error",
    )
    retry = push_sub.add_parser(
        "retry",
        help="start a task's dead push configs again: every event from where the receiver "
        "stopped, in order",
    )
    retry.add_argument("task_id", help="the task whose dead push configs to start again")
    retry.add_argument("--id", dest="config_id", help="only this push config")
    cluster = sub.add_parser(
        "cluster", help="N API processes and M workers on this machine, one database"
    )
    cluster.add_argument("--api", type=int, default=2, help="API processes (default 2)")
    cluster.add_argument("--workers", type=int, default=2, help="workers (default 2)")
    cluster.add_argument("--port", type=int, default=8000, help="the first API's port")
    ping = sub.add_parser(
        "ping", help="exit 0 if this process's heartbeat in the database is fresh (a probe)"
    )
    ping.add_argument("--executor-id", help="the process (A2A_AGENT_EXECUTOR_ID)")
    ping.add_argument(
        "--alive",
        action="store_true",
        help="only whether the process is running its loop (no database): a liveness probe",
    )
    ping.add_argument(
        "--max-age", type=float, default=120.0, help="--alive: seconds since its last mark (120)"
    )
    client_commands.add_commands(sub)
    return parser


async def _push(conninfo: str, args: argparse.Namespace) -> int:
    """The operator's view of dead deliveries, and a retry that starts them again. The
    database is migrated first, as for `keys`: a fresh one (the embedded default) has none
    yet, and none is dead."""
    await migrate(conninfo)
    pool = create_pool(conninfo, max_size=2)
    await pool.open(wait=True, timeout=30)
    try:
        store = PostgresPushStore(pool)
        if args.action == "dead":
            for c in await store.dead():
                print(
                    f"{c.task_id} {c.id} {c.url} delivered={c.delivered} acked_seq={c.acked_seq} "
                    f"attempts={c.attempts} error={c.last_error}"
                )
            return 0
        retried = await store.retry(args.task_id, args.config_id)
        print(f"retrying {len(retried)} push config(s): {', '.join(retried) or 'none were dead'}")
        return 0
    finally:
        await pool.close()


def _guarded(child: Callable[[], int]) -> Callable[[], int]:
    def guarded() -> int:
        try:
            return child()
        except (AgentError, StoreError) as exc:
            print(f"a2a-agent: {exc}", file=sys.stderr, flush=True)
            return 2

    return guarded


async def _keys(conninfo: str, args: argparse.Namespace) -> int:
    await migrate(conninfo)
    pool = create_pool(conninfo, max_size=2)
    await pool.open(wait=True, timeout=30)
    try:
        store = PostgresKeyStore(pool)
        if args.action == "create":
            try:
                token, stored = new_key(
                    args.principal, tuple(args.scope or DEFAULT_SCOPES), args.name
                )
            except ValueError as exc:
                print(f"a2a-agent keys create: {exc}", file=sys.stderr)
                return 2
            await store.create(stored)
            print(token)
            print(
                f"key {stored.id} for {stored.principal}: {' '.join(stored.scopes)} "
                "(shown once; send as 'Authorization: Bearer <key>')",
                file=sys.stderr,
            )
            return 0
        if args.action == "list":
            for key in await store.keys():
                revoked = f" revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else ""
                print(f"{key.id} {key.principal} [{' '.join(key.scopes)}] {key.name}{revoked}")
            return 0
        if await store.revoke(args.key_id):
            print(f"revoked {args.key_id}")
            return 0
        print(f"a2a-agent keys revoke: no active key {args.key_id!r}", file=sys.stderr)
        return 2
    finally:
        await pool.close()


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _run(
    args: argparse.Namespace, settings: Settings, conninfo: str, child: Callable[[], int]
) -> int:
    """Run `child` (supervised unless --no-supervise), with its push deliverer beside it
    when it is a worker that delivers from a process of its own."""
    # What is imported by now lives as long as the process: out of the collector's sight, a
    # full collection scans what the run makes, not every module's objects (130 ms each with
    # the server's stack loaded), and the forked children share those pages untouched.
    gc.freeze()
    reap_on_loops()  # commands and git reaped by their loop, not by a thread each
    if args.no_supervise:
        return _guarded(child)()
    if settings.worker.run_worker and settings.push.delivery == "process":
        return supervise(_guarded(child), _guarded(lambda: run_delivery(settings, conninfo)))
    return supervise(_guarded(child))


def _listen(host: str, port: int) -> socket.socket:
    """The listening TCP socket, made with its protocol named.

    asyncio sets TCP_NODELAY only on sockets whose `proto` is IPPROTO_TCP; `create_server`
    (and uvicorn's `fd=`) leave it 0, so Nagle's algorithm met the client's delayed ACK and
    held every keep-alive response back 40 ms (GetTask p50 43.5 ms with one connection).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}") from exc
    return sock


def _run_worker(settings: Settings, conninfo: str) -> int:
    asyncio.run(_worker(settings, conninfo))
    return 0


async def _worker(settings: Settings, conninfo: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Runtime(settings, conninfo, role="worker"):
        logging.getLogger("a2a_agent").info("worker %s running", settings.worker.executor_id)
        await stop.wait()


def _not_dumpable() -> None:
    """No core dumps and no ptrace or /proc/<pid>/environ reads by other processes of this
    user: the environment holds the database URL and the model key."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        logging.getLogger("a2a_agent").warning(
            "could not make the process non-dumpable (errno %d)", ctypes.get_errno()
        )


def _serving(settings: Settings) -> str:
    """What an operator needs at start: where it serves, the key, where the data lives."""
    where = (
        f"PostgreSQL at {_without_password(settings.database.url)}"
        if settings.database.url
        else f"embedded PostgreSQL in {settings.home / 'pgdata'}"
    )
    key = (
        "authentication OFF (A2A_AGENT_INSECURE_OPEN)"
        if settings.server.insecure_open
        else f"admin key in {settings.home / 'admin.key'}"
    )
    model = (
        settings.model.name
        if settings.model.api_key
        else "none (ANTHROPIC_API_KEY is unset): plans whose items all have `run` commands "
        "work; goals in words and items for the model are refused, saying so"
    )
    return (
        f"a2a-agent serving on http://{settings.server.host}:{settings.server.port}"
        f" (card: /.well-known/agent-card.json, dashboard: /ui)\n"
        f"  key: {key}\n  data: {where}; workspaces in {settings.workspaces}\n"
        f"  model: {model}\n"
        f"  worker in this process: {'yes' if settings.worker.run_worker else 'no'}"
    )


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in client_commands.COMMANDS:
        # A client of a running server: no settings, no database (`entry` sends these to the
        # client before this module is imported; this is `main` called directly).
        from a2a_agent import client_cli  # noqa: PLC0415

        return client_cli.run(args)
    _not_dumpable()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = Settings.from_env(role=args.command)
        changes: dict[str, object] = {}
        if getattr(args, "executor_id", None):
            changes["executor_id"] = args.executor_id
        if args.command == "serve":
            if args.host:
                changes["host"] = args.host
            if args.port is not None:
                changes["port"] = args.port
            changes["run_worker"] = not args.no_worker
        if getattr(args, "no_supervise", False) and settings.push.delivery == "process":
            changes["push_delivery"] = "inline"  # no nanny to fork the deliverer
        settings = settings.with_overrides(**changes)
        logs.setup(settings.logging.format, getattr(logging, settings.logging.level.upper()))
        if (
            settings.server.insecure_open
            and args.command == "serve"
            and not _loopback(settings.server.host)
        ):
            raise ConfigError(
                f"A2A_AGENT_INSECURE_OPEN=1 turns authentication off, so it is refused with "
                f"--host {settings.server.host}: anyone reaching the port could run commands. Bind "
                "127.0.0.1 (or ::1), or leave it unset and use API keys (a2a-agent keys create)"
            )
        if args.command == "ping" and args.alive:
            return check_alive(settings.home, settings.worker.executor_id, args.max_age)
        conninfo = resolve_database_url(settings.database.url, settings.home)
        if args.command == "migrate":
            applied = asyncio.run(migrate(conninfo))
            run_dbos_database_migrations(sqlalchemy_url(conninfo))
            print(
                f"migrated: applied {applied or 'nothing (already current)'}; engine schema current"
            )
            return 0
        if args.command == "push":
            return asyncio.run(_push(conninfo, args))
        if args.command == "keys":
            return asyncio.run(_keys(conninfo, args))
        if args.command == "ping":
            return asyncio.run(ops.ping(settings, conninfo))
        if args.command == "cluster":
            return ops.run_cluster(
                settings, conninfo, apis=args.api, workers=args.workers, port=args.port
            )
        if args.command == "worker":
            return _run(args, settings, conninfo, lambda: _run_worker(settings, conninfo))
        if args.command == "deliver":
            return _run(
                args,
                settings.with_overrides(run_worker=False),
                conninfo,
                lambda: run_delivery(settings, conninfo),
            )
        from a2a_agent.app import create_app  # noqa: PLC0415  (serve only: builds the web app)

        # The listening socket belongs to the parent, so it survives a replaced child and
        # requests queue in its backlog meanwhile.
        sock = _listen(settings.server.host, settings.server.port)

        def serve() -> int:
            app = create_app(
                settings, conninfo, started=lambda: print(_serving(settings), flush=True)
            )
            config = uvicorn.Config(
                app,
                log_level="warning",
                log_config=None,  # our handlers (text or JSON lines), not uvicorn's own
                timeout_graceful_shutdown=10,
                http=settings.server.http,
                loop="asyncio",  # not uvloop: it forks the whole process for every command
            )
            server = uvicorn.Server(config)
            # A start that failed (uvicorn has logged why, and exits on its own) is not a
            # clean exit: the nanny stops there, and whatever started `serve` sees it.
            try:
                server.run(sockets=[sock])
            except SystemExit:
                return STARTUP_FAILED
            return 0 if server.started else STARTUP_FAILED

        return _run(args, settings, conninfo, serve)
    except (AgentError, StoreError) as exc:
        print(f"a2a-agent: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
