"""Keep a worker alive: run it in a forked child and fork a new one the moment it is killed.

The parent imports everything once and then only waits, so a child killed with SIGKILL (or
by the OOM killer) is replaced within milliseconds instead of a cold interpreter start, and
the new child resumes the dead one's runs under the same executor id. So is a child that
exits with EXIT_RESTART (a background task of it died, see `a2a_agent.watched`). A child that
exits otherwise (a clean stop, a configuration error) ends the parent, and its siblings, too.

A parent may keep several children (the service and its push deliverer): each is replaced on
its own, and a signal to the parent goes to all of them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from types import FrameType
from typing import Any

from a2a_agent.watched import EXIT_RESTART

log = logging.getLogger(__name__)
CRASH_LOOP_WINDOW_S = 10.0
CRASH_LOOP_RESTARTS = 5
CRASH_LOOP_PAUSE_S = 5.0


def _fork(run_child: Callable[[], int], handlers: dict[int, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    for sig, handler in handlers.items():
        signal.signal(sig, handler)
    code = 1
    try:
        code = run_child()
    except BaseException:
        traceback.print_exc()
        raise
    finally:
        # Skip the parent's exit hooks (they belong to the parent), but not the child's
        # buffered output.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def supervise(*children: Callable[[], int]) -> int:
    """Run each of `children` in a forked child until one exits by itself; then stop the
    others and return its code (the first child's, when the parent was signalled)."""
    running: dict[int, int] = {}  # pid -> index into children
    codes: dict[int, int] = {}
    stopping = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(running):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous: dict[int, Any] = {
        sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    restarts = [deque[float](maxlen=CRASH_LOOP_RESTARTS) for _ in children]
    # The code of the child that ended by itself: the others, stopped after it, exit 0 on
    # SIGTERM, and must not hide that (a deliverer that could not reach the database).
    ended_with: int | None = None
    try:
        for index, child in enumerate(children):
            running[_fork(child, previous)] = index
        while running:
            pid, status = os.waitpid(-1, 0)
            index = running.pop(pid, -1)
            if index < 0:
                continue
            exited = os.WIFEXITED(status)
            codes[index] = os.WEXITSTATUS(status) if exited else 0
            if stopping:
                continue
            if exited and codes[index] != EXIT_RESTART:
                stopping, ended_with = True, codes[index]
                for other in list(running):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(other, signal.SIGTERM)
                continue
            _replaced(pid, status, exited, restarts[index])
            running[_fork(children[index], previous)] = index
        return codes.get(0, 0) if ended_with is None else ended_with
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _replaced(pid: int, status: int, exited: bool, restarts: deque[float]) -> None:
    restarts.append(time.monotonic())
    if exited:
        log.error("worker process %d asked to be replaced; starting a new one", pid)
    else:
        log.error(
            "worker process %d was killed by signal %d; starting a new one",
            pid,
            os.WTERMSIG(status),
        )
    if len(restarts) == CRASH_LOOP_RESTARTS and restarts[-1] - restarts[0] < CRASH_LOOP_WINDOW_S:
        log.error(
            "killed %d times in %g s; pausing %g s before the next start",
            CRASH_LOOP_RESTARTS,
            CRASH_LOOP_WINDOW_S,
            CRASH_LOOP_PAUSE_S,
        )
        time.sleep(CRASH_LOOP_PAUSE_S)
