"""Test servers forked from a process that has imported the server already.

A server process spends about a second of CPU importing its stack before it does anything;
a run of the suite starts some 160 of them on 2 cores. The zygote imports `a2a_agent.cli`
once per test process and forks each `serve`, `worker` or `deliver` from there, as the
product's own nanny forks its children after its imports: the child sets the process's
environment, its own session, its output to the log file, and calls the same `main` that
`python -m a2a_agent` calls. The child is a real process (kill -9, signals, exit codes);
what is not tested this way is the interpreter's start itself, so a server started from
other code (`code_dir`) and the wheel's are still started with exec.

The zygote reaps its children and writes each exit code to a file named by the pid in its
status directory (negative for a signal, as `Popen.returncode`), which `Forked` reads.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import IO, Any


class Forked:
    """A server forked by the zygote: the part of `subprocess.Popen` the tests use."""

    def __init__(self, pid: int, status_dir: Path) -> None:
        self.pid = pid
        self._status = status_dir / str(pid)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"forked pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)


class Zygote:
    """This test process's zygote, started on first use."""

    _lock = threading.Lock()
    _process: subprocess.Popen[str] | None = None
    _status_dir: Path | None = None

    @classmethod
    def spawn(cls, args: list[str], env: dict[str, str], cwd: Path, log: Path) -> Forked:
        with cls._lock:
            if cls._process is None or cls._process.poll() is not None:
                cls._start(cwd)
            assert cls._process is not None and cls._status_dir is not None
            stdin, stdout = cls._process.stdin, cls._process.stdout
            assert stdin is not None and stdout is not None
            request = {"args": args, "env": env, "cwd": str(cwd), "log": str(log)}
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
            answer = stdout.readline()
            if not answer.strip().isdigit():
                raise RuntimeError(f"the zygote did not fork: {answer!r}")
            return Forked(int(answer), cls._status_dir)

    @classmethod
    def _start(cls, repo: Path) -> None:
        """The zygote, run from `repo` (the code every server it forks runs)."""
        cls._status_dir = Path(tempfile.mkdtemp(prefix="a2a-zygote-"))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONPATH": str(repo),
        }
        cls._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.zygote", str(cls._status_dir)],
            cwd=repo,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )


def _reap(status_dir: Path) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        partial = status_dir / f"{pid}.part"
        partial.write_text(str(os.waitstatus_to_exitcode(status)))
        partial.rename(status_dir / str(pid))


def _child(request: dict[str, Any]) -> None:
    """In the forked child: become the server process `request` describes."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["a2a-agent", *request["args"]]
        from a2a_agent.cli import main  # noqa: PLC0415  (imported by the zygote already)

        code = main(request["args"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001  (the child's end, reported as its exit code)
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve_forks(status_dir: Path, requests: IO[str], answers: IO[str]) -> None:
    import a2a_agent.cli  # noqa: F401, PLC0415  (what every server imports before it forks)

    signal.signal(signal.SIGCHLD, lambda *_: _reap(status_dir))
    gc.freeze()
    for line in requests:
        request = json.loads(line)
        # An earlier child may have had this pid (pids wrap, and the servers start many
        # processes): its exit code is removed before the new child can be reaped, with
        # SIGCHLD held meanwhile, or the new one would read as exited at once.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            pid = os.fork()
            if pid == 0:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
                _child(request)
            (status_dir / str(pid)).unlink(missing_ok=True)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        answers.write(f"{pid}\n")
        answers.flush()
    # The test process has ended (its end closed our input): nobody reads the codes now.
    shutil.rmtree(status_dir, ignore_errors=True)


if __name__ == "__main__":
    serve_forks(Path(sys.argv[1]), sys.stdin, sys.stdout)
