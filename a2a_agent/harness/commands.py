"""Run a shell command in a workspace with a timeout, keeping only the tail of its output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from a2a_agent.harness.files import overwrite
from a2a_agent.harness.sandbox import Sandbox


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    output_tail: str
    timed_out: bool
    duration_s: float

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CommandResult:
        return cls(
            command=str(data["command"]),
            exit_code=int(data["exit_code"]),
            output_tail=str(data["output_tail"]),
            timed_out=bool(data["timed_out"]),
            duration_s=float(data["duration_s"]),
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _pdeathsig_prefix() -> list[str]:
    # If the worker dies, its command's shell dies with it (setpriv sets the parent-death
    # signal, then execs bash); what the shell started is killed by `kill_leftovers`.
    return ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


def _note_group(pid_file: Path, pgid: int | None) -> None:
    # A few bytes on local disk, written synchronously so a crash right after leaves it there.
    if pgid is None:
        pid_file.unlink(missing_ok=True)
    else:
        pid_file.parent.mkdir(exist_ok=True)
        overwrite(pid_file, str(pgid))


def kill_leftovers(pid_file: Path) -> None:
    """Kill the process group a previous incarnation of this worker left running here."""
    try:
        pgid = int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return
    _kill_group(pgid)
    pid_file.unlink(missing_ok=True)


async def run_command(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    tail_bytes: int,
    sandbox: Sandbox,
    pid_file: Path | None = None,
) -> CommandResult:
    """Run `command` with bash in `cwd`, in the sandbox for `cwd`. Exit code 124 with
    timed_out=True means it was killed.

    The command gets its own process group so a timeout or a cancellation kills everything it
    started, not just the shell (and in the sandbox, killing it ends its PID namespace).
    """
    started = time.monotonic()
    if pid_file is not None:
        kill_leftovers(pid_file)
    proc = await asyncio.create_subprocess_exec(
        *_pdeathsig_prefix(),
        *sandbox.wrap(["/bin/bash", "-c", command], cwd),
        cwd=cwd,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    if pid_file is not None:
        _note_group(pid_file, proc.pid)
    tail = bytearray()

    async def pump() -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            tail.extend(chunk)
            if len(tail) > tail_bytes:
                del tail[: len(tail) - tail_bytes]

    timed_out = False
    try:
        await asyncio.wait_for(asyncio.gather(pump(), proc.wait()), timeout=timeout_s)
    except TimeoutError:
        timed_out = True
        _kill_group(proc.pid)
        await proc.wait()
    except asyncio.CancelledError:
        _kill_group(proc.pid)
        raise
    else:
        # The shell exited; do not leave background children of the command behind.
        _kill_group(proc.pid)
    if pid_file is not None:
        _note_group(pid_file, None)
    exit_code = 124 if timed_out else (proc.returncode if proc.returncode is not None else -1)
    text = tail.decode("utf-8", errors="replace")
    if timed_out:
        text += f"\n[a2a-agent: killed after {timeout_s:g} s timeout]"
    return CommandResult(
        command=command,
        exit_code=exit_code,
        output_tail=text,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
    )
