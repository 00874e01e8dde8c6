"""Children reaped on the loop that started them, through a pidfd: no thread per child.

On Python 3.11, asyncio waits for each child of `create_subprocess_exec` in a thread of its
own (`ThreadedChildWatcher`): every command, every git call and every box started a thread
that blocked in `waitpid`, and the loop waited for that thread to start. A pidfd (Linux 5.3)
becomes readable when its process exits, so the loop that started the child can wait for it
like for a socket. asyncio's own `PidfdChildWatcher` on 3.11 is bound to the one loop it was
attached to, and DBOS runs some of our steps on a loop of its own, where a subprocess then
failed ("the child watcher is not activated"); this one asks for the running loop at each
child. Python 3.12 and later wait on a pidfd per loop themselves: nothing is installed there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVarTuple, Unpack

_Ts = TypeVarTuple("_Ts")

log = logging.getLogger(__name__)


class LoopReaper(asyncio.AbstractChildWatcher):
    """Each child watched by the loop running when asyncio registers it (its transport's)."""

    def add_child_handler(
        self, pid: int, callback: Callable[[int, int, Unpack[_Ts]], object], *args: *_Ts
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # reaped already: there is no status left to give
            loop.call_soon(callback, pid, 255, *args)
            return
        loop.add_reader(pidfd, self._exited, loop, pidfd, pid, callback, args)

    @staticmethod
    def _exited(
        loop: asyncio.AbstractEventLoop,
        pidfd: int,
        pid: int,
        callback: Callable[..., object],
        args: tuple[Any, ...],
    ) -> None:
        loop.remove_reader(pidfd)
        os.close(pidfd)
        try:
            # Readable means it has exited: this wait returns at once. (WNOHANG could say
            # "not yet" as a status of 0, read as a clean exit.)
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:  # reaped by someone else (a waitpid(-1) elsewhere)
            log.warning("child %d was reaped elsewhere; its exit code is unknown", pid)
            returncode = 255
        else:
            returncode = os.waitstatus_to_exitcode(status)
        callback(pid, returncode, *args)

    def remove_child_handler(self, pid: int) -> bool:
        return True  # the reader goes when the child exits; nothing else is kept per child

    def attach_loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        pass  # no loop of its own: the running loop at each child

    def close(self) -> None:
        pass

    def is_active(self) -> bool:
        return True

    def __enter__(self) -> LoopReaper:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def reap_on_loops() -> bool:
    """Install `LoopReaper` for this process where it is needed and works (Python 3.11 on
    Linux with pidfds); whether it was. Called once by a server or worker process at start,
    before its loop runs: the child watcher is process-wide."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel before 5.3, or a seccomp policy refusing it
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(LoopReaper())
    return True
