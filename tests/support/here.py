"""`a2a-agent serve` in the test's own process: the real app, DBOS, worker, sandbox and HTTP
on a loopback port, run by uvicorn on a thread of its own. The same server as the process,
without a Python start-up (about 5 s of imports and launch per test on this machine); what
needs a process (kill -9, signals, the supervisor, the CLI's own output) starts one.

DBOS is one object per process, so one such server runs at a time in a test process; a
second `serve` in the same test is a process (see `start_agent` in conftest)."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path

import uvicorn
from dbos._dbos import _get_or_create_dbos_registry as _dbos_registry

from a2a_agent import watched
from a2a_agent.app import create_app
from a2a_agent.database import resolve_database_url
from a2a_agent.observe import logs
from a2a_agent.settings import Settings
from tests.support.processes import AgentProcess

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_live = threading.Lock()  # held while a server runs here: DBOS is one per process


def _stack_of(thread: threading.Thread) -> str:
    frame = sys._current_frames().get(thread.ident or 0)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(gone)"


def _tasks_of(loop: asyncio.AbstractEventLoop | None) -> str:
    """What the server's loop still awaits: its thread's stack shows only the idle select."""
    if loop is None:
        return ""
    try:
        tasks = list(asyncio.all_tasks(loop))  # read from another thread: a report, no more
    except RuntimeError:  # the set changed while it was read
        return "(its tasks changed while read)"
    lines = []
    for task in tasks:
        # Every frame, with its file: a hang once left only "Event waits" to go on.
        frames = task.get_stack()
        where = " <- ".join(
            f"{Path(f.f_code.co_filename).name}:{f.f_code.co_name}:{f.f_lineno}"
            for f in reversed(frames)
        )
        lines.append(f"  {task.get_name()}: {where or repr(task.get_coro())}")
    return "tasks of its loop:\n" + "\n".join(sorted(lines))


def here_is_taken() -> bool:
    return _live.locked()


class NeedsProcess(RuntimeError):
    """What the test asked of the server takes a process (mark it `processes`)."""


class _ServerThreads(logging.Filter):
    """The server's records, not the test's: the test runs on the main thread."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.thread != threading.main_thread().ident


async def _served(server: uvicorn.Server, sock: socket.socket) -> None:
    """uvicorn's serve, then what it left running canceled and given a bounded time to end,
    naming any that would not: `asyncio.run` would wait for them for ever, as the test's
    process would at its exit (a process is killed instead)."""
    await server.serve(sockets=[sock])
    me = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for task in left:
        task.cancel()
    _, pending = await asyncio.wait(left, timeout=5) if left else (set(), set())
    for task in pending:
        logging.getLogger(__name__).warning("left running at shutdown: %r", task)
    # Commands cut off with their tasks still hold a subprocess transport each; a process
    # killed at a test's end takes them with it, here they are closed (the command killed)
    # on their own loop, not left for the collector to warn about in a later test.
    loop = asyncio.get_running_loop()
    transports = [
        found
        for found in gc.get_objects()
        if isinstance(found, asyncio.SubprocessTransport) and getattr(found, "_loop", None) is loop
    ]
    for transport in transports:
        if not transport.is_closing():
            transport.close()
    await asyncio.sleep(0.05)
    # A transport already closing when the server stopped may not have closed its pipes
    # (their end runs on the loop, which is about to stop): the command's pipe files are
    # closed here, so none is left for the collector to warn about in a later test.
    for transport in transports:
        proc = getattr(transport, "_proc", None)
        for pipe in (getattr(proc, name, None) for name in ("stdin", "stdout", "stderr")):
            if pipe is not None and not pipe.closed:
                pipe.close()


def _bound(port: int, timeout: float = 10.0) -> socket.socket:
    """A socket bound on loopback; the port of a stopped server may be held a moment longer
    by a connection its client has not closed yet."""
    deadline = time.monotonic() + timeout
    while True:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        else:
            return sock


class ServerHere(AgentProcess):
    """The in-process twin of `AgentProcess` for role `serve` (its subclass so tests take
    either): url, env, log, stop and start; kill and signals need the process."""

    def __init__(
        self, *, database_url: str, home: Path, executor_id: str, env: Mapping[str, str]
    ) -> None:
        self.role = "serve"
        self.home = home
        self.executor_id = executor_id
        self.env = dict(env)
        self.log_path = home / f"{executor_id}-{time.monotonic_ns()}.log"
        self._database_url = database_url
        self._sock: socket.socket | None = _bound(0)
        self.port = int(self._sock.getsockname()[1])
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None  # the serving thread's, for reports
        self._handler: logging.Handler | None = None
        self._failed: BaseException | None = None
        self._died: int | None = None
        self._closing = False
        self._exit: Callable[[int], None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self, *, wait: bool = True) -> ServerHere:
        if not _live.acquire(blocking=False):
            raise NeedsProcess("another server runs in this test process")
        try:
            self._begin()
        except BaseException:
            self._release()
            raise
        if wait:
            self.wait_ready()
        return self

    def _begin(self) -> None:
        if self._sock is None:  # a restart serves on the same port, as a process does
            self._sock = _bound(self.port)
        sock = self._sock
        self.home.mkdir(parents=True, exist_ok=True)
        # The process's log, as `logs.setup` writes it, into the file `log()` reads.
        self._handler = logging.FileHandler(self.log_path)
        self._handler.setFormatter(logs.Text(FORMAT))
        self._handler.addFilter(logs.ContextFilter())
        self._handler.addFilter(_ServerThreads())
        root = logging.getLogger()
        root.addHandler(self._handler)
        logging.getLogger("dbos").addHandler(self._handler)
        self._level = root.level
        root.setLevel(logging.INFO)
        settings = Settings.from_env(self.env, role="serve").with_overrides(
            host="127.0.0.1", port=self.port, run_worker=True, push_delivery="inline"
        )
        conninfo = resolve_database_url(settings.database.url, settings.home)
        self._app = create_app(settings, conninfo)
        config = uvicorn.Config(
            self._app,
            # uvicorn's own steps of a shutdown ("Waiting for connections to close", "Waiting
            # for application shutdown") in the log a failed stop prints; no access lines.
            log_level="info",
            access_log=False,
            log_config=None,
            timeout_graceful_shutdown=10,
            http=settings.server.http,
            loop="asyncio",
        )
        self._server = uvicorn.Server(config)
        # A watched task that dies exits the process; here that would be the test's: the
        # server stops instead, and the test fails with the log.
        self._exit = watched.on_death(self._death)
        self._thread = threading.Thread(
            target=self._serve,
            args=(self._server, sock),
            name=f"here-{self.executor_id}",
            daemon=True,  # one left running must not hold the test process at its exit
        )
        self._thread.start()

    def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        try:
            with asyncio.Runner() as runner:
                self._loop = runner.get_loop()
                runner.run(_served(server, sock))
        except BaseException as exc:  # noqa: BLE001 -- reported by wait_ready and stop
            self._failed = exc

    def _death(self, code: int) -> None:
        if not self._closing:
            self._died = code
        if self._server is not None:
            self._server.should_exit = True

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._server is not None and self._thread is not None
            if self._server.started:
                return
            if not self._thread.is_alive():
                self._release()
                raise RuntimeError(f"serve ended early ({self._failed!r}):\n{self.log()}")
            time.sleep(0.02)
        raise TimeoutError(f"serve not ready after {timeout}s:\n{self.log()}")

    def stop(self, timeout: float = 60.0) -> int:
        """As SIGTERM does to the process: a graceful shutdown. Its own bounds: uvicorn's 10 s
        for open connections, then the steps in flight (A2A_AGENT_SHUTDOWN_GRACE_S, 30 s),
        then DBOS's threads; under the suite's load a stop once took more than 30 s."""
        if self._server is None or self._thread is None:
            return 0
        self._server.should_exit = True
        self._thread.join(timeout)
        alive = self._thread.is_alive()
        # Where it waits, for the failure's report (taken before the log is let go).
        stuck = f"{_stack_of(self._thread)}\n{_tasks_of(self._loop)}" if alive else ""
        log = self.log() if alive else ""
        self._release()
        if alive:
            raise TimeoutError(f"serve did not stop in {timeout}s; its thread at:\n{stuck}\n{log}")
        failed, self._failed = self._failed, None
        if self._died is not None:
            raise RuntimeError(f"a watched task died (exit {self._died}):\n{self.log()}")
        if failed is not None and not isinstance(failed, SystemExit):
            raise RuntimeError(f"serve failed: {failed!r}") from failed
        return 0

    def _release(self) -> None:
        if self._exit is not None:
            watched.on_death(self._exit)
            self._exit = None
        if self._handler is not None:
            root = logging.getLogger()
            root.removeHandler(self._handler)
            logging.getLogger("dbos").removeHandler(self._handler)
            root.setLevel(self._level)
            self._handler.close()
            self._handler = None
        self._server = None
        self._thread = None
        # DBOS keeps each configured instance (the plan runner) in its process-wide registry
        # beyond destroy(); the next server here registers its own under the same name.
        registry = _dbos_registry()
        registry.instance_info_map.clear()
        registry.dbos = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if _live.locked():
            _live.release()

    def kill(self) -> None:
        raise NeedsProcess("kill -9 needs a process: mark the test `processes`")

    def close(self) -> None:
        """At the end of the test: as the process is killed there, steps in flight are not
        waited for (their asyncio tasks are canceled, their commands killed)."""
        if self._server is not None:
            engine = self._app.state.runtime.engine
            if hasattr(engine, "_shutdown_grace_s"):
                engine._shutdown_grace_s = 0
            self._server.force_exit = True
        self._closing = True
        self.stop()
        # Commands cut off with their loop leave pipe transports for the collector; they
        # die with the process where a process is killed, so they are not this test's leak.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            gc.collect()

    def signal(self, sig: int) -> None:
        raise NeedsProcess(f"signal {sig} needs a process: mark the test `processes`")
