"""Real a2a-agent processes on loopback, started and killed the way an operator would."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

import httpx

from tests.support.zygote import Forked, Zygote

REPO = Path(__file__).resolve().parents[2]

LOGS: list[Path] = []  # every process's log, for the secret check at the end of the session


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")  # "gw3" under xdist
    return int(worker[2:]) if worker[2:].isdigit() else 0


_BLOCK = 400  # ports each xdist worker may hand out before it wraps round
_next_ports = itertools.count()


def free_port(n: int = 1) -> int:
    """A port (with the n - 1 after it) free on loopback, below the kernel's ephemeral range.

    Every outgoing connection and every bind to port 0 takes a port from the ephemeral range,
    so a port picked there can be taken by another test's client socket before our server
    binds it: a cluster's second API process failed in CI with EADDRINUSE that way. Below the
    range a port is only taken by someone binding it on purpose, and each xdist worker hands
    out its own block, so two workers never pick the same one."""
    floor = _ephemeral_floor()
    base = max(1024, floor - 8 * _BLOCK) + (_worker_index() % 8) * _BLOCK
    for _ in range(_BLOCK):
        first = base + next(_next_ports) % (_BLOCK - n)
        if all(_free(first + i) for i in range(n)):
            return first
    raise RuntimeError(f"no {n} free port(s) in {base}..{base + _BLOCK}")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# What the test suite adds for every server it starts (tests/conftest.py fills it); the
# benchmarks that start servers through this module leave it empty.
SUITE_ENV: dict[str, str] = {}


def agent_env(
    database_url: str,
    home: Path,
    executor_id: str,
    code_dir: Path = REPO,
    env: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """What a test's server reads: the test's database and home, and the suite's defaults."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "DATABASE_URL": database_url,
        "A2A_AGENT_HOME": str(home),
        "A2A_AGENT_EXECUTOR_ID": executor_id,
        # A queue poll costs CPU whether work waits or not: an idle server spent 9 % of a
        # core polling every 0.1 s, 4 % every 1 s. A start waits 0.12 s on average here.
        "A2A_AGENT_QUEUE_POLL_S": "0.25",
        "A2A_AGENT_RECONCILE_INTERVAL_S": "2",
        # Tests of other behaviour expect a failed item or a spent budget to end the run;
        # tests of pauses ask for them in the task's policy.
        "A2A_AGENT_ON_ITEM_FAILURE": "stop",
        "A2A_AGENT_BUDGET_PAUSE": "off",
        # Most tests are about runs, not callers: no keys (loopback only). The tests of
        # authentication (test_auth.py) turn it back on.
        "A2A_AGENT_INSECURE_OPEN": "1",
        # The tests' stand-in for an external system: a ledger file beside the home,
        # which every command may append to (tests/test_sandbox.py shares nothing).
        "A2A_AGENT_SANDBOX_SHARED": str(home.parent),
        "PYTHONPATH": str(code_dir),
        **SUITE_ENV,
        **(env or {}),
    }


class AgentProcess:
    """One `a2a-agent serve` or `a2a-agent worker` process with its own log file."""

    def __init__(
        self,
        *,
        role: str,
        database_url: str,
        home: Path,
        executor_id: str,
        extra_args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        code_dir: Path = REPO,
    ) -> None:
        self.role = role
        self.code_dir = code_dir
        self.port = free_port() if role == "serve" else 0
        self.home = home
        self.executor_id = executor_id
        # The command line after `a2a-agent`: what the zygote's child hands `main`, and an
        # exec's arguments after `python -m a2a_agent`.
        self.argv = [role, *extra_args]
        if role == "serve":
            self.argv += ["--port", str(self.port)]
        self.args = [sys.executable, "-m", "a2a_agent", *self.argv]
        self.env = agent_env(database_url, home, executor_id, code_dir, env)
        self.log_path = home / f"{executor_id}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | Forked | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, *, wait: bool = True) -> AgentProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        LOGS.append(self.log_path)
        if self.code_dir == REPO and not os.environ.get("A2A_TEST_EXEC"):
            # Forked from a process that imported the server already (`zygote.py`).
            self.proc = Zygote.spawn(self.argv, dict(self.env), REPO, self.log_path)
        else:
            log = self.log_path.open("ab")
            self.proc = subprocess.Popen(
                self.args,
                env=self.env,
                cwd=self.code_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if (code := self.proc.poll()) is not None:
                # The exit code too: a process killed before it logged leaves nothing else.
                raise RuntimeError(f"{self.role} exited early (exit {code}):\n{self.log()}")
            if self.role != "serve":
                name = "deliverer" if self.role == "deliver" else "worker"
                if f"{name} {self.executor_id} running" in self.log():
                    return
            else:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                        return
            time.sleep(0.1)
        raise TimeoutError(f"{self.role} not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as when a machine dies."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise


@contextlib.contextmanager
def serving(
    database_url: str, home: Path, executor_id: str, *args: str, **env: str
) -> Iterator[AgentProcess]:
    """A `serve` process for a module's tests to share (`--no-worker` and the like in
    `args`, settings in `env`), killed when they are done."""
    process = AgentProcess(
        role="serve",
        database_url=database_url,
        home=home,
        executor_id=executor_id,
        extra_args=args,
        env=env,
    ).start()
    try:
        yield process
    finally:
        process.kill()


class StartAgent(Protocol):
    """The `start_agent` fixture: start a process on the test's database and home."""

    def __call__(
        self, role: str = "serve", executor_id: str | None = None, *args: str, **env: str
    ) -> AgentProcess: ...
