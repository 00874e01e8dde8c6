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


class LaunchedEngine(RunEngine, Protocol):
    """What the process's runtime needs of its engine: the edge's two methods, and a start
    and an end inside the app's lifespan (DBOS's launch and destroy; a test's fake: none)."""

    async def launch(self) -> None: ...

    async def shutdown(self) -> None: ...
