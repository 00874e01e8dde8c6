"""Peers: other A2A agents this service hands work to (A2A_AGENT_PEERS, a JSON list of
`{"name", "url", "key"}`; the key is the bearer credential this service presents there).

The client speaks A2A 1.0 over JSON-RPC with the a2a-sdk's types: a delegation is a
SendMessage with `returnImmediately` whose messageId is the delegation's idempotency key (a
peer that deduplicates by messageId, as this service does, makes one task however often a
crash makes us send it), with a push config pointing back at this service; GetTask is the
fallback when pushes do not come; a reply to the peer's request and a cancel are messages
too. Errors come back as `PeerError` saying what the peer answered.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.types.a2a_pb2 import Message, Part, Role, Task
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from a2a_agent.errors import AgentError, ConfigError

JSON = dict[str, Any]
A2A_VERSION = {"A2A-Version": "1.0"}
TIMEOUT_S = 30.0


class PeerError(AgentError):
    """A peer could not be reached, or refused what we sent."""


class PeerRefused(PeerError):
    """The peer answered, with an error: what we sent was not taken (nothing was made)."""


@dataclass(frozen=True)
class Peer:
    name: str
    url: str
    key: str = field(repr=False)


def parse_peers(raw: str | None) -> dict[str, Peer]:
    if not raw:
        return {}
    try:
        listed = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"A2A_AGENT_PEERS is not JSON: {exc}") from None
    if not isinstance(listed, list):
        raise ConfigError('A2A_AGENT_PEERS must be a list of {"name", "url", "key"}')
    peers = {}
    for entry in listed:
        if not isinstance(entry, Mapping) or not all(
            isinstance(entry.get(k), str) and entry.get(k) for k in ("name", "url")
        ):
            raise ConfigError(f'each peer needs a "name" and a "url"; got {entry!r}')
        peers[str(entry["name"])] = Peer(
            str(entry["name"]), str(entry["url"]).rstrip("/"), str(entry.get("key") or "")
        )
    return peers


def data_part(payload: JSON) -> Part:
    value = Value()
    value.struct_value.update(payload)
    return Part(data=value, media_type="application/json")


def state_name(task: Task) -> str:
    from a2a.types.a2a_pb2 import TaskState  # noqa: PLC0415

    return str(TaskState.Name(task.status.state)).removeprefix("TASK_STATE_").lower()


# httpx's own trust (SSL_CERT_FILE, SSL_CERT_DIR, else certifi's bundle), built once per
# process: building it reads every CA certificate (about 25 ms of CPU) for each client made.
_peer_tls = functools.cache(httpx.create_ssl_context)


class PeerClient:
    """JSON-RPC calls to peers; one httpx client for all of them."""

    def __init__(self, peers: Mapping[str, Peer]) -> None:
        self.peers = dict(peers)
        self._http = httpx.AsyncClient(
            timeout=TIMEOUT_S, follow_redirects=False, verify=_peer_tls()
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    def peer(self, name: str) -> Peer:
        found = self.peers.get(name)
        if found is None:
            known = sorted(self.peers) or "none are configured"
            raise PeerError(f"no peer named {name!r} (A2A_AGENT_PEERS; known: {known})")
        return found

    async def _call(self, name: str, method: str, params: JSON) -> JSON:
        peer = self.peer(name)
        headers = {**A2A_VERSION, **({"Authorization": f"Bearer {peer.key}"} if peer.key else {})}
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        try:
            response = await self._http.post(peer.url + "/", json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise PeerError(f"peer {name} at {peer.url} cannot be reached: {exc}") from None
        if response.status_code != 200:
            raise PeerError(f"peer {name} answered {response.status_code}: {response.text[:300]}")
        answer = response.json()
        if "error" in answer:
            error = answer["error"]
            raise PeerRefused(
                f"peer {name} refused {method}: {error.get('message')} ({error.get('code')})"
            )
        return dict(answer.get("result") or {})

    async def send(
        self,
        name: str,
        *,
        message_id: str,
        text: str,
        data: JSON | None = None,
        push_url: str | None = None,
        push_token: str | None = None,
    ) -> Task:
        """A new task at the peer (returnImmediately; the same messageId twice is one task)."""
        parts = [Part(text=text)] + ([data_part(data)] if data else [])
        message = Message(message_id=message_id, role=Role.ROLE_USER, parts=parts)
        configuration: JSON = {"returnImmediately": True}
        if push_url:
            configuration["taskPushNotificationConfig"] = {
                "url": push_url, **({"token": push_token} if push_token else {}),
            }  # fmt: skip
        result = await self._call(
            name, "SendMessage", {"message": MessageToDict(message), "configuration": configuration}
        )
        return _task(result.get("task") or result)

    async def get(self, name: str, task_id: str) -> Task:
        return _task(await self._call(name, "GetTask", {"id": task_id}))

    async def reply(self, name: str, task_id: str, *, message_id: str, approval: JSON) -> Task:
        """Answer the peer task's pending request, as its caller."""
        message = Message(
            message_id=message_id, role=Role.ROLE_USER, task_id=task_id,
            parts=[data_part({"approval": approval})],
        )  # fmt: skip
        result = await self._call(
            name,
            "SendMessage",
            {"message": MessageToDict(message), "configuration": {"returnImmediately": True}},
        )
        return _task(result.get("task") or result)

    async def fetch(self, name: str, url: str) -> bytes:
        """A file the peer serves (a result too large to travel inline), with our key; only
        from the peer's own address."""
        peer = self.peer(name)
        if not url.startswith(peer.url + "/"):
            raise PeerError(f"peer {name} pointed at {url!r}, outside {peer.url}")
        headers = {"Authorization": f"Bearer {peer.key}"} if peer.key else {}
        try:
            response = await self._http.get(url, headers=headers)
        except httpx.HTTPError as exc:
            raise PeerError(f"peer {name}: {exc}") from None
        if response.status_code != 200:
            raise PeerError(f"peer {name} answered {response.status_code} for {url}")
        return response.content

    async def cancel(self, name: str, task_id: str) -> Task:
        return _task(await self._call(name, "CancelTask", {"id": task_id}))


def _task(data: JSON) -> Task:
    task = Task()
    ParseDict(data, task, ignore_unknown_fields=True)
    return task
