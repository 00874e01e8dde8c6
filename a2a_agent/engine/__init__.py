"""The run engine: durable execution of a task's plan, one checkpointed step at a time."""

from __future__ import annotations

from typing import Protocol


class RunEngine(Protocol):
    """What the edge needs from the engine: start a task's run, stop it."""

    async def start(self, task_id: str, segment: int = 0) -> None:
        """Hand a segment of the task's run to a worker (0: from the start; n: after the
        n-th wait); starting the same segment twice is a no-op."""
        ...

    async def cancel(self, task_id: str) -> None:
        """The task's state says canceled already: see that its run stops and closes."""
        ...
