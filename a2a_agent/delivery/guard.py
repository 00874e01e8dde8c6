"""Where a webhook may point: not at this machine, a private network, link-local or cloud
metadata addresses, unless its host is on the allowlist (A2A_AGENT_PUSH_ALLOW_HOSTS: host
names or CIDRs). Checked when a config is registered and again on every connection the
deliverer opens (`transport.GuardedBackend` connects to the address it checked), since what a
name resolves to can change.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from a2a_agent.errors import AgentError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class UrlRefused(AgentError):
    """A webhook URL this server will not call."""


@dataclass(frozen=True)
class AllowList:
    hosts: frozenset[str]
    networks: tuple[Network, ...]

    @classmethod
    def parse(cls, raw: str | None) -> AllowList:
        hosts: set[str] = set()
        networks: list[Network] = []
        for item in (raw or "").split(","):
            entry = item.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry)
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, addresses: Sequence[str]) -> bool:
        if host.lower() in self.hosts:
            return True
        return bool(addresses) and all(
            any(ipaddress.ip_address(a) in n for n in self.networks) for a in addresses
        )


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not (ip.is_multicast or ip.is_reserved)


async def resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UrlRefused(f"the host {host!r} does not resolve ({exc})") from exc
    return sorted({str(info[4][0]) for info in found})


def check_syntax(url: str) -> tuple[str, int]:
    """The webhook URL's host and port; UrlRefused unless it is a plain http(s) URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UrlRefused(f"a webhook URL must be http(s)://host/...; got {url!r}")
    if parts.username or parts.password:
        raise UrlRefused("a webhook URL must not carry credentials; use authentication")
    host = parts.hostname
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:
        raise UrlRefused(f"the webhook URL's port is not a number: {url!r}") from exc
    return host, port


# Why a host is refused, in the words of what was to be called: (host, its private addresses).
Refusal = Callable[[str, Sequence[str]], str]


def webhook_refused(host: str, private: Sequence[str]) -> str:
    return (
        f"the webhook host {host!r} resolves to {', '.join(private)}: loopback, private, "
        "link-local and metadata addresses are refused unless the server's "
        "A2A_AGENT_PUSH_ALLOW_HOSTS lists the host"
    )


def check_addresses(
    host: str, addresses: Sequence[str], allow: AllowList, refused: Refusal = webhook_refused
) -> None:
    """Raise UrlRefused unless `host`, resolving to `addresses`, may be called; `refused`
    says why in the words of what was to be called (the allowlist is the same: webhooks,
    git URLs and input files share A2A_AGENT_PUSH_ALLOW_HOSTS)."""
    if allow.allows(host, addresses):
        return
    private = [a for a in addresses if not _public(a)]
    if private:
        raise UrlRefused(refused(host, private))


async def check_url(url: str, allow: AllowList) -> None:
    """Raise UrlRefused, saying why, unless this server may POST to `url`."""
    host, port = check_syntax(url)
    check_addresses(host, await resolve(host, port), allow)
