"""Runs that resume from rows (begun since the patch "rows"): their steps are not DBOS steps.

A recovery runs such a workflow's body again from its start, and each step finds, in the
task's rows and its keyed effects, what it already did (a step recorded before returns what
it recorded; the body's decisions come from the snapshot of the rows). What DBOS gave those
steps and they still need comes from here: which mode a workflow is in, the retry through a
database outage, and the plain coroutine function under a DBOS step.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from a2a_agent.harness.kernel.results import JSON
from persistence.errors import StoreUnavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

# Whether this workflow resumes from rows (runs begun since the patch "rows"): its steps are
# not DBOS steps, so a recovery runs the body again from the start and each step finds, in
# the task's rows and its keyed effects, what it already did. Set per workflow: each runs as
# its own asyncio task.
FROM_ROWS: contextvars.ContextVar[bool] = contextvars.ContextVar("from_rows", default=False)


def _database_outage(exc: BaseException) -> bool:
    return isinstance(exc, StoreUnavailable)


# Steps retry only while the database is unreachable (about four minutes in all); any other
# error is a real failure of the step and ends the run with its reason.
OUTAGE_RETRY: dict[str, Any] = {
    "retries_allowed": True,
    "max_attempts": 12,
    "interval_seconds": 1.0,
    "backoff_rate": 1.5,
    "should_retry": _database_outage,
}


async def outage_retried(make: Callable[[], Awaitable[T]]) -> T:
    """`make()` again while the database is unreachable, as OUTAGE_RETRY has DBOS retry a
    step: a run that resumes from rows retries its steps itself."""
    delay = float(OUTAGE_RETRY["interval_seconds"])
    tries = int(OUTAGE_RETRY["max_attempts"])
    for attempt in range(1, tries + 1):
        try:
            return await make()
        except StoreUnavailable as exc:
            if attempt == tries:
                raise
            log.warning("the database is unreachable (%s); try %d of %d", exc, attempt, tries)
            await asyncio.sleep(delay)
            delay *= float(OUTAGE_RETRY["backoff_rate"])
    raise AssertionError("unreachable")  # the loop returns or raises


def plain_step(step: Callable[..., Awaitable[JSON]]) -> Callable[..., Awaitable[JSON]]:
    """The coroutine function a bound DBOS step wraps (DBOS's decorators keep __wrapped__)."""
    method = getattr(step, "__func__", step)
    plain = _PLAIN.get(method)
    if plain is None:
        plain = _PLAIN[method] = inspect.unwrap(method)
    return plain


_PLAIN: dict[Callable[..., Awaitable[JSON]], Callable[..., Awaitable[JSON]]] = {}
