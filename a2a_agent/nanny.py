"""Keep a worker alive: run it in a forked child and fork a new one the moment it is killed.

The parent imports everything once and then only waits, so a child killed with SIGKILL (or
by the OOM killer) is replaced within milliseconds instead of a cold interpreter start, and
the new child resumes the dead one's runs under the same executor id. So is a child that
exits with EXIT_RESTART (a background task of it died, see `a2a_agent.watched`). A child that
exits otherwise (a clean stop, a configuration error) ends the parent too.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from types import FrameType

from a2a_agent.watched import EXIT_RESTART

log = logging.getLogger(__name__)
CRASH_LOOP_WINDOW_S = 10.0
CRASH_LOOP_RESTARTS = 5
CRASH_LOOP_PAUSE_S = 5.0


def supervise(run_child: Callable[[], int]) -> int:
    """Run `run_child()` in forked children until one exits by itself; return its code."""
    child = 0
    stopping = False

    def forward(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        if child:
            os.kill(child, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    restarts: deque[float] = deque(maxlen=CRASH_LOOP_RESTARTS)
    try:
        while True:
            child = os.fork()
            if child == 0:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
                code = 1
                try:
                    code = run_child()
                except BaseException:
                    traceback.print_exc()
                    raise
                finally:
                    # Skip the parent's exit hooks (they belong to the parent), but not the
                    # child's buffered output.
                    logging.shutdown()
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            _, status = os.waitpid(child, 0)
            exited = os.WIFEXITED(status)
            if stopping or (exited and os.WEXITSTATUS(status) != EXIT_RESTART):
                return os.WEXITSTATUS(status) if exited else 0
            restarts.append(time.monotonic())
            if exited:
                log.error("worker process %d asked to be replaced; starting a new one", child)
            else:
                log.error(
                    "worker process %d was killed by signal %d; starting a new one",
                    child,
                    os.WTERMSIG(status),
                )
            if (
                len(restarts) == CRASH_LOOP_RESTARTS
                and restarts[-1] - restarts[0] < CRASH_LOOP_WINDOW_S
            ):
                log.error(
                    "killed %d times in %g s; pausing %g s before the next start",
                    CRASH_LOOP_RESTARTS,
                    CRASH_LOOP_WINDOW_S,
                    CRASH_LOOP_PAUSE_S,
                )
                time.sleep(CRASH_LOOP_PAUSE_S)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
