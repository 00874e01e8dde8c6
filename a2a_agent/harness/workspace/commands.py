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

from a2a_agent.harness.workspace.files import overwrite
from a2a_agent.harness.workspace.sandbox import Sandbox, cannot_run


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int
    output_tail: str
    timed_out: bool
    duration_s: float
    # Why the program could not run, when the shell said so (`sandbox.cannot_run`); the same
    # words end `output_tail`, so whatever shows the tail shows them.
    cannot_run: str | None = None

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
            cannot_run=str(data["cannot_run"]) if data.get("cannot_run") else None,
        )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


async def _end_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the command's process group, reap its leader, then kill the group again: bwrap
    forks the box's init as it starts, and one forked while the first kill landed outlives
    its parent (seen under load: a canceled `sleep 60` still running 15 s later); it is
    still in the group, which outlives its leader while a member lives."""
    _kill_group(proc.pid)
    await proc.wait()
    _kill_group(proc.pid)


def _pdeathsig_prefix(sandbox: Sandbox) -> list[str]:
    # If the worker dies, its command's shell dies with it: in the box, bwrap's own
    # --die-with-parent does it (and kills the box's every process); without the box,
    # setpriv sets the parent-death signal, then execs bash, and what the shell started is
    # killed by `kill_leftovers`. (setpriv before bwrap cost an exec, 2.5 ms a command.)
    if sandbox.enabled:
        return []
    return ["setpriv", "--pdeathsig", "KILL", "--"] if shutil.which("setpriv") else []


# What the pid file says between commands: no group. The file stays and is written over
# (`overwrite`): a new file is a new inode, about 1 ms on an ext4 measured here, against
# 0.01 ms for writing over one (a command's note and its clearing, at every command).
NO_GROUP = "-"


def _note_group(pid_file: Path, pgid: int | None) -> None:
    # A few bytes on local disk, written synchronously so a crash right after leaves it there.
    if pgid is None:
        with contextlib.suppress(FileNotFoundError):
            overwrite(pid_file, NO_GROUP)
    else:
        pid_file.parent.mkdir(exist_ok=True)
        overwrite(pid_file, str(pgid))


def noted_group(pid_file: Path) -> int | None:
    """The process group `pid_file` says is running, if any."""
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):  # no file, or NO_GROUP
        return None


def kill_leftovers(pid_file: Path) -> None:
    """Kill the process group a previous incarnation of this worker left running here."""
    pgid = noted_group(pid_file)
    if pgid is None:
        return
    _kill_group(pgid)
    _note_group(pid_file, None)


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
    timed_out=True means it was killed. Exit code 127 or 126 with `cannot_run` set means the
    shell said its program was not found or not executable (`sandbox.cannot_run` says why, and
    the same words end the output tail); without it, the program itself exited so.

    The command gets its own process group so a timeout or a cancellation kills everything it
    started, not just the shell (and in the sandbox, killing it ends its PID namespace).
    """
    started = time.monotonic()
    if pid_file is not None:
        kill_leftovers(pid_file)
    proc = await asyncio.create_subprocess_exec(
        *_pdeathsig_prefix(sandbox),
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
        # The task awaits the gather itself, so whatever ends it (the timeout's cancellation, a
        # caller's cancel, an error) is retrieved here. (`asyncio.wait_for` on 3.11 cancels the
        # gather on a caller's cancel and never retrieves the CancelledError the gather then
        # holds: asyncio logged "_GatheringFuture exception was never retrieved" at ERROR.)
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(pump(), proc.wait())
    except TimeoutError:
        timed_out = True
        await _end_group(proc)
    except asyncio.CancelledError:
        # Cancelled as planned: kill the box and reap it (a killed box exits at once), then
        # let the cancel go on. A second cancel while reaping goes on too, the group noted.
        await _end_group(proc)
        if pid_file is not None:
            _note_group(pid_file, None)
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
    why = None if timed_out else cannot_run(sandbox, exit_code, text, search_path=env.get("PATH"))
    if why is not None:
        text += ("" if text.endswith("\n") or not text else "\n") + f"[a2a-agent: {why}]"
    return CommandResult(
        command=command,
        exit_code=exit_code,
        output_tail=text,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
        cannot_run=why,
    )
