"""The push deliverer as a process of its own.

Delivery shares nothing with a run but the database, so it runs beside the worker rather
than in it: a run's steps (and the threads DBOS runs them on) no longer hold up the
deliverer's event loop, and a receiver's trouble stays out of the worker. The nanny forks it
as the service's sibling (A2A_AGENT_PUSH_DELIVERY=process, the default); `a2a-agent deliver`
runs one on its own. It needs a small pool, a LISTEN connection and the signing key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from contextlib import AsyncExitStack

from a2a_agent.delivery.deliverer import DeliveryConfig, PushDeliverer
from a2a_agent.delivery.guard import AllowList
from a2a_agent.delivery.signing import Signer
from a2a_agent.delivery.transport import WebhookClient
from a2a_agent.settings import Settings
from a2a_agent.startup import freeze_startup_objects
from a2a_agent.watched import watch
from persistence.db import create_pool
from persistence.migrate import migrate
from persistence.notify import PUSH_CHANNEL, TaskNotifier
from persistence.push import PostgresPushStore
from persistence.secrets import SecretBox

log = logging.getLogger(__name__)


def delivery_config(settings: Settings) -> DeliveryConfig:
    return DeliveryConfig(
        max_attempts=settings.push.max_attempts,
        max_age_s=settings.push.max_age_s,
        timeout_s=settings.push.timeout_s,
        backoff_s=settings.push.backoff_s,
    )


def run_delivery(settings: Settings, conninfo: str) -> int:
    asyncio.run(_deliver(settings, conninfo))
    return 0


async def _deliver(settings: Settings, conninfo: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await migrate(conninfo)  # the tables it reads; serialised with the service's own call
    async with AsyncExitStack() as stack:
        pool = create_pool(conninfo, max_size=4)
        await pool.open(wait=True, timeout=30)
        stack.push_async_callback(pool.close)
        store = PostgresPushStore(
            pool, SecretBox.from_settings(settings.push.secret_key, settings.home)
        )
        signer = Signer(settings.server.url)
        await signer.load(store)
        notifier = TaskNotifier(conninfo, channel=PUSH_CHANNEL)
        watch(await notifier.start(), "the deliverer's event listener")
        stack.push_async_callback(notifier.stop)
        client = WebhookClient(AllowList.parse(settings.push.allow_hosts))
        stack.push_async_callback(client.aclose)
        deliverer = PushDeliverer(
            store, notifier, config=delivery_config(settings), client=client, signer=signer
        )
        task = asyncio.create_task(deliverer.run_forever(), name="push-deliverer")
        watch(task, "the push deliverer")
        freeze_startup_objects()
        log.info("deliverer %s running (pid %d)", settings.worker.executor_id, os.getpid())
        await stop.wait()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
