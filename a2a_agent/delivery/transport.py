"""The deliverer's HTTP client: httpcore's connection pool (keep-alive per receiver, no
redirects, no proxies from the environment) on a network backend that resolves each
receiver's host, applies the SSRF guard to what it resolved to, and connects to exactly the
address it checked: a name cannot be re-pointed between the check and the connection.

httpcore rather than httpx: the same transport without the client layer, at about half the
CPU per notification (bench/push_latency.py; docs/ARCHITECTURE.md has the figures).
"""

from __future__ import annotations

import functools
import ssl
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore

from a2a_agent.delivery.guard import (
    AllowList,
    Refusal,
    check_addresses,
    check_syntax,
    resolve,
    webhook_refused,
)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, allow: AllowList, refused: Refusal = webhook_refused) -> None:
        self.allow = allow
        self.refused = refused
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve(host, port)
        check_addresses(host, addresses, self.allow, self.refused)
        return await self._inner.connect_tcp(
            addresses[0], port, timeout, local_address, socket_options
        )

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Any = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks are not delivered over unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def system_tls() -> ssl.SSLContext:
    """The system's trust store as a TLS client context, built once per process: building one
    reads every CA certificate (about 25 ms of CPU), and a context serves any number of
    connections."""
    return ssl.create_default_context()


class WebhookClient:
    """POST a body, read at most `max_response_bytes` of the answer, return its status.

    One connection pool per receiver origin: httpcore looks over every connection of a pool
    on each request, so one shared pool made each notification pay for every receiver's
    connections (two thirds of the deliverer's CPU in a profile with 32 open)."""

    def __init__(self, allow: AllowList, *, per_origin: int = 8, origins: int = 256) -> None:
        self._backend = GuardedBackend(allow)
        self._ssl = system_tls()
        self._per_origin = per_origin
        self._origins = origins
        self._pools: OrderedDict[tuple[str, str, int], httpcore.AsyncConnectionPool] = OrderedDict()

    async def _pool(self, url: str) -> httpcore.AsyncConnectionPool:
        parts = urlsplit(url)
        origin = (parts.scheme, parts.hostname or "", parts.port or 0)
        pool = self._pools.get(origin)
        if pool is None:
            pool = httpcore.AsyncConnectionPool(
                ssl_context=self._ssl,
                max_connections=self._per_origin,
                keepalive_expiry=30.0,
                network_backend=self._backend,
            )
            self._pools[origin] = pool
            if len(self._pools) > self._origins:
                await self._forget_one_idle()
        self._pools.move_to_end(origin)
        return pool

    async def _forget_one_idle(self) -> None:
        """Close the least recently used pool with no request in flight."""
        for origin, pool in self._pools.items():
            if all(c.is_idle() or c.is_closed() for c in pool.connections):
                del self._pools[origin]
                await pool.aclose()
                return

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        *,
        timeout_s: float,
        max_response_bytes: int,
    ) -> int:
        check_syntax(url)
        timeouts = {"connect": timeout_s, "read": timeout_s, "write": timeout_s, "pool": timeout_s}
        pool = await self._pool(url)
        async with pool.stream(
            "POST",
            url,
            headers=list(headers.items()),
            content=body,
            extensions={"timeout": timeouts},
        ) as response:
            read = 0
            # A small answer is read to its end, so the connection goes back to the pool; a
            # large one is cut off (and its connection closed): it is not ours to read.
            async for chunk in response.aiter_stream():
                read += len(chunk)
                if read > max_response_bytes:
                    break
            return int(response.status)

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), OrderedDict()
        for pool in pools:
            await pool.aclose()
