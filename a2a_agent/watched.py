"""Background tasks that must not die quietly: if one does, the process exits to be replaced.

The supervisor (heartbeats, janitor, watchdog) and the notifier (LISTEN, cache invalidation)
run beside the server. A heartbeat that silently stopped would let another worker take over
runs still running here; a dead listener would leave the read cache on with nothing to
invalidate it. So an unexpected end of either exits the process at once with
EXIT_RESTART, before any further step starts; the nanny (or the platform's supervisor)
starts a new process, which resumes the runs under the same executor id.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from a2a_agent.errors import AgentError

log = logging.getLogger(__name__)

EXIT_RESTART = 75  # EX_TEMPFAIL: "start me again"; the nanny does


def _exit_now(code: int) -> None:
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


_on_death: Callable[[int], None] = _exit_now


def on_death(exit_now: Callable[[int], None]) -> Callable[[int], None]:
    """Replace what a watched task's death does (the process exits), returning the old one:
    a server the tests run inside their own process stops itself instead of exiting it."""
    global _on_death  # one per process, as the process's exit is
    old, _on_death = _on_death, exit_now
    return old


def watch(
    task: asyncio.Task[None], what: str, exit_now: Callable[[int], None] | None = None
) -> None:
    """Exit the process if `task` ends other than by being cancelled (shutdown cancels it)."""

    def ended(done: asyncio.Task[None]) -> None:
        if done.cancelled():
            return
        error = done.exception()
        if error is None:
            log.critical("%s stopped unexpectedly; exiting so the process is replaced", what)
        elif isinstance(error, AgentError):  # ours, saying what happened: no traceback
            log.critical("%s stopped: %s", what, error)
        else:
            log.critical(
                "%s died (%s: %s); exiting so the process is replaced",
                what,
                type(error).__name__,
                error,
                exc_info=error,
            )
        (exit_now or _on_death)(EXIT_RESTART)

    task.add_done_callback(ended)


class InjectedFault(RuntimeError):
    """An error raised on purpose by a test, through A2A_AGENT_FAULT_FILE."""


class FaultPoint:
    """Test hook: when the file at `path` names `component`, that component raises once.

    The file is removed as the fault fires, so the replacement process runs normally.
    Unset in production (no path, no effect).
    """

    def __init__(self, path: Path | None, component: str) -> None:
        self.path = path
        self.component = component

    def __call__(self) -> None:
        if self.path is None:
            return
        try:
            named = self.path.read_text().strip()
        except OSError:
            return
        if named == self.component:
            self.path.unlink(missing_ok=True)
            raise InjectedFault(f"injected fault in the {self.component}")


def crash_point(path: Path | None, point: str) -> None:
    """Test hook: when the file at `path` names `point`, the process dies at once (SIGKILL,
    the file removed first), as it would if its machine were lost right there. Unset in
    production (no path, no effect)."""
    if path is None:
        return
    try:
        named = path.read_text().strip()
    except OSError:
        return
    if named == point:
        path.unlink(missing_ok=True)
        os.kill(os.getpid(), signal.SIGKILL)
