"""`notifications/tasks` for an MCP client that listens (MCP 2026-07-28, tasks extension).

A client opts in with `subscriptions/listen` whose filter names `taskIds`; the answer is a
stream: the acknowledgement (the task ids honoured: the caller's own), then the task's
DetailedTask (as `tasks/get` gives it) each time a listed task moves on, until every listed
task has ended, when the stream ends with its result. The `mcp` SDK's listen handler carries
only its own event kinds (list changes, resources), so this is a middleware of the SDK's
server that serves a listen naming `taskIds` and hands every other message on. A waiting
stream holds no database connection: it waits on the process's one LISTEN connection.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from typing import Any, Literal, cast

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types import (
    NotificationParams,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenResult,
)
from pydantic import ConfigDict

from persistence.notify import LOST_WAKE_S
from persistence.records import JSON

log = logging.getLogger(__name__)
MAX_TASKS = 100  # task ids one listen may name


class TaskNotificationParams(NotificationParams):
    """A DetailedTask (as `tasks/get` gives it): its fields ride as extra keys."""

    model_config = ConfigDict(extra="allow")


class TaskNotification(types.Notification[TaskNotificationParams, Literal["notifications/tasks"]]):
    method: Literal["notifications/tasks"] = "notifications/tasks"
    params: TaskNotificationParams


class TaskListeners:
    """The middleware: `door` reads tasks as the caller (`McpDoor.detailed`) and watches them
    (its handler's notifier)."""

    def __init__(self, door: Any, declared: Any) -> None:
        self.door = door
        self.declared = declared  # whether the request's client declared the tasks extension

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        wanted = _task_ids(ctx)
        if ctx.method != "subscriptions/listen" or not wanted or not self.declared(ctx):
            return await call_next(ctx)
        meta: JSON = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        async with AsyncExitStack() as stack:
            wakes = []
            seen: dict[str, JSON] = {}
            for task_id in wanted:
                # Watch before the first read, so a change between the two is not missed.
                wake = await stack.enter_async_context(self.door.handler.notifier.watch(task_id))
                try:
                    seen[task_id] = await self.door.detailed(ctx.request, task_id)
                except MCPError:
                    log.info("listen: task %s is not the caller's; not honoured", task_id)
                    continue
                wakes.append(wake)
            honoured = SubscriptionFilter.model_validate({"taskIds": list(seen)})
            await ctx.session.send_notification(
                SubscriptionsAcknowledgedNotification(
                    params=SubscriptionsAcknowledgedNotificationParams(
                        notifications=honoured, _meta=meta
                    )
                ),
                related_request_id=ctx.request_id,
            )
            await self._follow(ctx, seen, wakes, meta)
        return SubscriptionsListenResult(_meta=meta)

    async def _follow(
        self,
        ctx: ServerRequestContext[Any, Any],
        seen: dict[str, JSON],
        wakes: list[asyncio.Event],
        meta: JSON,
    ) -> None:
        """Send each listed task's state when it changes, until every one has ended."""
        live = {t for t, task in seen.items() if not _ended(task)}
        while live:
            waiters = [asyncio.ensure_future(w.wait()) for w in wakes]
            await asyncio.wait(waiters, timeout=LOST_WAKE_S, return_when=asyncio.FIRST_COMPLETED)
            for waiter in waiters:
                waiter.cancel()
            for wake in wakes:
                wake.clear()
            for task_id in sorted(live):
                now = await self.door.detailed(ctx.request, task_id)
                if now == seen[task_id]:
                    continue
                seen[task_id] = now
                notification = TaskNotification(
                    params=TaskNotificationParams.model_validate({**now, "_meta": meta})
                )
                await ctx.session.send_notification(
                    cast(types.ServerNotification, notification), related_request_id=ctx.request_id
                )
                if _ended(now):
                    live.discard(task_id)


def _task_ids(ctx: ServerRequestContext[Any, Any]) -> list[str]:
    params = ctx.params if isinstance(ctx.params, dict) else {}
    notifications = params.get("notifications")
    ids = notifications.get("taskIds") if isinstance(notifications, dict) else None
    if not isinstance(ids, list):
        return []
    return [i for i in ids if isinstance(i, str) and i][:MAX_TASKS]


def _ended(task: JSON) -> bool:
    return task.get("status") in ("completed", "failed", "cancelled")
