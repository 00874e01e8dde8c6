"""Slots: what is scarce in a worker, shared by every run it drives.

A worker admits hundreds of runs at once (they spend their time waiting on the model), and
limits what they share instead: commands (cores), model calls in flight (the provider's rate
limits) and database connections (the pool). A run waits for a slot, never for another run
to end, so a run with a long command holds one command slot and the others' model turns go on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class SlotsView:
    name: str
    size: int
    held: int
    waiting: int
    long: int  # holders past their lease: still running, no longer counted


class _Bounded:
    """At most `size` at once, and the counts a view shows (both kinds of slot below)."""

    def __init__(self, name: str, size: int, lease_s: float | None) -> None:
        if size < 1:
            raise ValueError(f"{name}: at least one slot is needed, not {size}")
        self.name = name
        self.size = size
        self.lease_s = lease_s
        self._free = asyncio.Semaphore(size)
        self._held = 0
        self._waiting = 0
        self._long = 0  # holders past their lease: still running, no longer counted

    def view(self) -> SlotsView:
        return SlotsView(self.name, self.size, self._held, self._waiting, self._long)


class Slots(_Bounded):
    """At most `size` holders at once; those waiting are served in the order they came
    (asyncio's semaphore wakes its waiters first in, first out), so a burst that arrived
    later does not pass a run that was waiting before it.

    With `lease_s`, a holder gives its slot up after that long and goes on outside the count:
    a few long commands (a build, a 10-minute test suite, a `sleep`) then cannot hold every
    slot while the short ones of every other run wait behind them; the kernel shares the
    cores among what runs."""

    def __init__(self, name: str, size: int, *, lease_s: float | None = None) -> None:
        super().__init__(name, size, lease_s)
        self._not_before = 0.0  # monotonic time before which no slot is handed out

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        self._waiting += 1
        try:
            await self._free.acquire()
        finally:
            self._waiting -= 1
        counted = True

        def lapse() -> None:
            nonlocal counted
            counted = False
            self._held -= 1
            self._long += 1
            self._free.release()

        try:
            # A pause asked for meanwhile (a rate limit) holds back every call that starts
            # after it, not only the one that was told. (A deadline that a later 429 may move
            # on, so a sleep to it, not an event.)
            while (wait := self._not_before - time.monotonic()) > 0:  # noqa: ASYNC110
                await asyncio.sleep(wait)
        except BaseException:
            self._free.release()
            raise
        self._held += 1
        lease = (
            asyncio.get_running_loop().call_later(self.lease_s, lapse)
            if self.lease_s is not None
            else None
        )
        try:
            yield
        finally:
            if lease is not None:
                lease.cancel()
            if counted:
                self._held -= 1
                self._free.release()
            else:
                self._long -= 1

    def pause(self, seconds: float) -> None:
        """Hand out no slot for `seconds` from now (a longer pause asked before still holds)."""
        self._not_before = max(self._not_before, time.monotonic() + max(0.0, seconds))


@dataclass
class _Ticket:
    counted: bool = False  # holds one of the slots now (not set aside, not past its lease)
    lapsed: bool = False  # went on past its lease, outside the count
    lease: asyncio.TimerHandle | None = None


class StepSlots(_Bounded):
    """A step's own work (its reads, records, renders and the harness's git), at most `size`
    steps at once of all runs; the step sets its slot aside while it waits on its effect
    (a model call, a command, a peer: `aside`) and takes one again, in line, after.

    The worker's CPU is what every run's bookkeeping and the door's requests share, in one
    event loop served first come, first served: with hundreds of runs stepping at once each
    request waited behind all of them (500 sends took 25-45 s at N = 500 in
    bench/concurrent_runs.py). Steps beyond `size` wait here instead, so what runs in the
    loop is a few steps and the door, and the runs' steps are served in the order they came.

    A step holding a slot past `lease_s` (a large restore, a slow database) gives it up and
    goes on outside the count, as a long command does with its slot."""

    def __init__(self, size: int, *, lease_s: float | None = 1.0) -> None:
        super().__init__("steps", size, lease_s)
        self._ticket: ContextVar[_Ticket | None] = ContextVar(f"step-slot-{id(self)}", default=None)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """One step's slot, for as long as the step runs (but while it is set aside)."""
        ticket = _Ticket()
        await self._take(ticket)
        token = self._ticket.set(ticket)
        try:
            yield
        finally:
            self._ticket.reset(token)
            self._give(ticket)

    @asynccontextmanager
    async def aside(self) -> AsyncIterator[None]:
        """While the step waits on something else (its effect): its slot is free for others.
        Nothing to do outside a step, or where the slot is already set aside (a command of
        a check run side by side with others, an effect's command)."""
        ticket = self._ticket.get()
        if ticket is None or not (ticket.counted or ticket.lapsed):
            yield
            return
        self._give(ticket)
        try:
            yield
        finally:
            await self._take(ticket)

    async def _take(self, ticket: _Ticket) -> None:
        self._waiting += 1
        try:
            await self._free.acquire()
        finally:
            self._waiting -= 1
        ticket.counted = True
        self._held += 1
        if self.lease_s is not None:
            ticket.lease = asyncio.get_running_loop().call_later(self.lease_s, self._lapse, ticket)

    def _lapse(self, ticket: _Ticket) -> None:
        ticket.lease = None
        if ticket.counted:
            ticket.counted, ticket.lapsed = False, True
            self._held -= 1
            self._long += 1
            self._free.release()

    def _give(self, ticket: _Ticket) -> None:
        if ticket.lease is not None:
            ticket.lease.cancel()
            ticket.lease = None
        if ticket.lapsed:
            ticket.lapsed = False
            self._long -= 1
        if ticket.counted:
            ticket.counted = False
            self._held -= 1
            self._free.release()
