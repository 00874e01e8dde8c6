"""The deliverer's HTTP client: the SSRF guard on every connection it opens, no redirects."""

from __future__ import annotations

import pytest

from a2a_agent.delivery.guard import AllowList, UrlRefused
from a2a_agent.delivery.transport import WebhookClient
from tests.support.receiver import receiver


async def post(client: WebhookClient, url: str) -> int:
    return await client.post(
        url, b"{}", {"X-A2A-Event-Id": "t:1"}, timeout_s=5, max_response_bytes=4096
    )


async def test_a_connection_to_a_private_address_is_refused_when_it_is_opened() -> None:
    # The config was accepted once (an allowlist, or a name that resolved elsewhere); the
    # check that counts is the one made on the address the connection goes to.
    client = WebhookClient(AllowList.parse(""))
    try:
        with receiver() as hook:
            with pytest.raises(UrlRefused, match=r"resolves to 127\.0\.0\.1"):
                await post(client, hook.url)
            with pytest.raises(UrlRefused, match=r"resolves to 127\.0\.0\.1"):
                await post(client, hook.url.replace("127.0.0.1", "localhost"))
            assert hook.received == []
    finally:
        await client.aclose()


async def test_allowed_hosts_are_called_and_redirects_are_not_followed() -> None:
    client = WebhookClient(AllowList.parse("127.0.0.1"))
    try:
        with receiver() as hook, receiver() as elsewhere:
            assert await post(client, hook.url) == 200
            hook.statuses = [302]
            hook.location = elsewhere.url
            assert await post(client, hook.url) == 302
            assert len(hook.received) == 2 and elsewhere.received == []
            with pytest.raises(UrlRefused, match="must not carry credentials"):
                await post(client, hook.url.replace("http://", "http://user:pw@"))
    finally:
        await client.aclose()
