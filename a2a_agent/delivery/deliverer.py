"""Delivering push notifications from the event log.

Each worker runs one deliverer. It claims configs whose task has events after their cursor
(woken by NOTIFY, and every `poll_s`) and, for each claimed config, sends its events one at a
time, in order. Events come in batches, read by the same statement that moves the cursor
past the previous batch. A failure schedules the failed event again with exponential backoff
and jitter; after `max_attempts`, or once the event is older than `max_age_s`, the config is
dead (visible, retried by an operator: `a2a-agent push retry`). Every notification carries
its event id (`<task>:<seq>`) in `X-A2A-Event-Id` and in the event's metadata, so a receiver
drops what it has seen. Configs are worked concurrently: a slow receiver holds only its own.
The body's shape is the config's A2A version's (`payloads.py`): the same events, retries,
order and dead letters for both.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import httpcore

from a2a_agent.delivery.guard import UrlRefused
from a2a_agent.delivery.payloads import Payload, payload_for
from a2a_agent.delivery.signing import SIGNATURE_HEADER, Signer, hmac_headers, is_hmac_scheme
from a2a_agent.delivery.transport import WebhookClient
from persistence.errors import StoreError
from persistence.push import Claimed, PushConfig, PushEvent, PushOutbox

log = logging.getLogger(__name__)
EVENT_ID_HEADER = "X-A2A-Event-Id"
TOKEN_HEADER = "X-A2A-Notification-Token"


class Wakeups(Protocol):
    def watch(self, task_id: str) -> AbstractAsyncContextManager[asyncio.Event]: ...


@dataclass(frozen=True)
class DeliveryConfig:
    max_attempts: int = 8
    max_age_s: float = 24 * 3600.0
    timeout_s: float = 5.0
    backoff_s: float = 1.0
    backoff_cap_s: float = 300.0
    lease_s: float = 60.0
    poll_s: float = 0.5
    concurrency: int = 128
    linger_s: float = 0.3  # a caught-up config stays claimed this long for its next event
    max_response_bytes: int = 4096
    batch: int = 50  # events read per statement; a crash re-sends at most one batch


def event_id(task_id: str, seq: int) -> str:
    return f"{task_id}:{seq}"


class PushDeliverer:
    def __init__(
        self,
        outbox: PushOutbox,
        wakeups: Wakeups,
        *,
        config: DeliveryConfig,
        client: WebhookClient,
        signer: Signer,
    ) -> None:
        self.outbox = outbox
        self.wakeups = wakeups
        self.config = config
        self.client = client
        self.signer = signer
        self._wake: asyncio.Event | None = None

    async def run_forever(self) -> None:
        """Claim and deliver until cancelled. Database trouble is waited out; a bug in a
        delivery ends this task (and the process: it is watched)."""
        running: set[asyncio.Task[None]] = set()
        async with self.wakeups.watch("*") as wake:
            self._wake = wake
            while True:
                wake.clear()
                for finished in [t for t in running if t.done()]:
                    running.discard(finished)
                    finished.result()  # a delivery's own bug surfaces here
                free = self.config.concurrency - len(running)
                if free > 0:
                    try:
                        claimed = await self.outbox.claim(
                            free, self.config.lease_s, self.config.batch
                        )
                    except StoreError as exc:
                        log.warning("push: %s", exc)
                        claimed = []
                    for one in claimed:
                        running.add(asyncio.create_task(self._deliver(one), name="push"))
                try:
                    await asyncio.wait_for(wake.wait(), self.config.poll_s)
                except TimeoutError:
                    continue

    async def _deliver(self, claimed: Claimed) -> None:
        config = claimed.config
        acked, events = config.acked_seq, claimed.events  # the cursor as stored
        payload = payload_for(config.protocol, config.task_id, claimed.context_id, claimed.base)
        try:
            # Watched from the start, so no NOTIFY of this task is missed while it is ours.
            async with self.wakeups.watch(config.task_id) as more_events:
                while True:
                    if not events:
                        # Caught up: keep the lease a moment, as a run's events come in
                        # bursts; the next one is then read and sent without a claim.
                        if not more_events.is_set():
                            try:
                                await asyncio.wait_for(more_events.wait(), self.config.linger_s)
                            except TimeoutError:
                                break
                        more_events.clear()
                    sent_to = acked
                    if events:
                        failure = await self._send_batch(config, payload, events)
                        if failure is not None:
                            await self._failed(config, acked + 1, *failure)
                            return
                        sent_to = events[-1].seq
                    # Past what was sent (if anything), and the next batch, in one statement.
                    more = await self.outbox.delivered(
                        config,
                        acked + 1,
                        sent_to,
                        lease_s=self.config.lease_s,
                        batch=self.config.batch,
                    )
                    if more is None:
                        return  # our lease ran out; another deliverer has the config
                    acked, events = sent_to, more
            # An event committed just before the release is claimed at once: look again.
            await self.outbox.release(config)
            if self._wake is not None:
                self._wake.set()
        except StoreError as exc:
            log.warning("push: %s (the lease runs out; the events are sent again)", exc)

    async def _failed(
        self, config: PushConfig, from_seq: int, event: PushEvent, error: str
    ) -> None:
        attempts = config.attempts + 1 if event.seq == config.acked_seq + 1 else 1
        dead = attempts >= self.config.max_attempts or event.age_s > self.config.max_age_s
        delay = min(self.config.backoff_cap_s, self.config.backoff_s * 2 ** (attempts - 1))
        await self.outbox.failed(
            config,
            from_seq,
            event.seq,
            attempts=attempts,
            error=error,
            delay_s=delay * random.uniform(0.5, 1.5),
            dead=dead,
        )
        if dead:
            log.warning(
                "push to %s for task %s is dead after %d attempts: %s",
                config.url,
                config.task_id,
                attempts,
                error,
            )

    async def _send_batch(
        self, config: PushConfig, payload: Payload, events: list[PushEvent]
    ) -> tuple[PushEvent, str] | None:
        """Send `events` in order until one fails: that event and what went wrong."""
        for event in events:
            body = payload.body(event)
            error = None if body is None else await self._send(config, event.seq, body)
            if error is not None:
                return event, error
        return None

    async def _send(self, config: PushConfig, seq: int, body: bytes) -> str | None:
        """POST one notification: None on a 2xx, else what went wrong."""
        the_id = event_id(config.task_id, seq)
        headers = {
            "Content-Type": "application/json",
            EVENT_ID_HEADER: the_id,
            SIGNATURE_HEADER: self.signer.sign(body, the_id),
        }
        if config.token:
            headers[TOKEN_HEADER] = config.token
        auth = config.authentication or {}
        if is_hmac_scheme(auth.get("scheme")):
            # The secret signs; it is never sent.
            try:
                headers.update(
                    hmac_headers(str(auth.get("credentials") or ""), the_id, body, int(time.time()))
                )
            except ValueError as exc:
                return f"cannot sign: {exc}"  # a secret stored before the check; never sent
        elif auth.get("scheme"):
            headers["Authorization"] = f"{auth['scheme']} {auth.get('credentials', '')}".strip()
        try:
            status = await self.client.post(
                config.url,
                body,
                headers,
                timeout_s=self.config.timeout_s,
                max_response_bytes=self.config.max_response_bytes,
            )
        except UrlRefused as exc:
            return str(exc)
        except httpcore.TimeoutException as exc:
            return f"no answer within {self.config.timeout_s:g} s ({type(exc).__name__})"
        except (httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol) as exc:
            return f"{type(exc).__name__}: {exc}"[:300]
        return None if 200 <= status < 300 else f"HTTP {status}"
