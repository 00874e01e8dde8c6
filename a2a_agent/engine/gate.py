"""The step gate: counts steps in flight, and on shutdown lets no new step start."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class StepGate:
    def __init__(self) -> None:
        self._in_flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._never = asyncio.Event()
        self.draining = False

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @asynccontextmanager
    async def step(self) -> AsyncIterator[None]:
        if self.draining:
            # A step that has not started by now never starts here: the run stays pending in
            # the engine and resumes on another worker, or here after the restart.
            await self._never.wait()
        self._in_flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._idle.set()

    async def drain(self, timeout_s: float) -> bool:
        """Stop new steps; wait up to `timeout_s` for those in flight. True if all finished."""
        self.draining = True
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
