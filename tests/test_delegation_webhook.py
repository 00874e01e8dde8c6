"""Delegation (issue 17): the webhook peers notify (`/peers/notify/<task>/<delegation>`). A
call with the token we gave but a signature that does not verify against the peer's JWKS is
refused and changes nothing; the same call signed by the peer is taken."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from a2a_agent.delivery.deliverer import TOKEN_HEADER
from a2a_agent.delivery.signing import SIGNATURE_HEADER, Signer
from persistence.secrets import SecretBox
from tests.support.a2a import a2a_client, send, wait_for
from tests.support.db import rows
from tests.support.processes import AgentProcess, StartAgent
from tests.support.waiting import wait_for_row
from tests.test_delegation import (
    WAITING,
    delegated_plan,
    peer_env,
    peer_key,
)
from tests.test_pauses import data_message


class Keys:
    """Signing keys for a `Signer` of the test's own (the peer's real key, or another)."""

    def __init__(self, found: list[tuple[str, str]]) -> None:
        self.found = found

    async def signing_keys(self) -> list[tuple[str, str]]:
        return self.found

    async def add_signing_key(self, kid: str, pem: str) -> None:
        self.found.insert(0, (kid, pem))


async def signer(issuer: str, keys: list[tuple[str, str]]) -> Signer:
    made = Signer(issuer)
    await made.load(Keys(keys))
    return made


def other_key(kid: str) -> tuple[str, str]:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return kid, pem.decode()


async def test_a_notification_whose_signature_does_not_verify_is_refused_and_changes_nothing(
    start_agent: StartAgent, peer: AgentProcess, database_url: str, home: Path
) -> None:
    key = peer_key(peer)
    # No polling: only a notification taken makes this service look at the peer's task.
    env = {**peer_env(peer, key), "A2A_AGENT_PEER_POLL_S": "3600"}
    server = start_agent("serve", "hook-1", **env)
    asking = {
        "goal": "name the service",
        "items": [{"id": "name", "title": "Pick a name", "ask": "What should it be called?"}],
    }
    items = [delegated_plan(asking, "true", "name")]
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": {"goal": "ask", "items": items}}))
        await wait_for(client, task.id, WAITING, timeout=60)  # the peer's pushes told us
    # Every event of the peer's task was delivered (and so taken here): none comes now.
    wait_for_row(
        peer.env["DATABASE_URL"],
        "SELECT p.acked_seq >= t.event_seq AND t.state = 'input_required'"
        " FROM push_configs p JOIN tasks t ON t.id = p.task_id",
        (),
        what="the peer's pushes delivered",
    )
    ((did,),) = rows(database_url, "SELECT id FROM delegations WHERE task_id = %s", task.id)
    url = f"{server.url}/peers/notify/{task.id}/{did}"
    token = SecretBox.from_settings(None, home).tag(f"{task.id}/{did}")
    # The peer's signing key as its own processes use it, and the kid its JWKS names.
    ((kid, pem),) = rows(peer.env["DATABASE_URL"], "SELECT kid, private_pem FROM signing_keys")
    real = await signer(peer.url, [(kid, pem)])
    impostor = await signer(peer.url, [other_key(kid)])  # the peer's kid, another key
    stranger = await signer(peer.url, [other_key("not-the-peers")])
    body = b'{"statusUpdate": {"taskId": "x"}}'

    def seen() -> list[tuple[Any, ...]]:
        """What a notification taken would change: the delegation's row and the task's."""
        return rows(
            database_url,
            "SELECT d.state, d.remote_state, d.updated_at, t.state, t.transition_seq,"
            " t.event_seq FROM delegations d JOIN tasks t ON t.id = d.task_id"
            " WHERE d.task_id = %s",
            task.id,
        )

    def notify(signature: str | None, sent: bytes = body) -> httpx.Response:
        headers = {TOKEN_HEADER: token, "Content-Type": "application/json"}
        if signature is not None:
            headers[SIGNATURE_HEADER] = signature
        return httpx.post(url, content=sent, headers=headers, timeout=30)

    before = seen()
    forged = {
        "the signature is not a JWT": "not-a-jwt",
        "the signature does not verify": impostor.sign(body, "e1"),
        "is not in the sender's JWKS": stranger.sign(body, "e2"),
        "the body is not the one that was signed": real.sign(b'{"other": 1}', "e3"),
    }
    for why, signature in forged.items():
        refused = notify(signature)
        assert refused.status_code == 401 and why in refused.text, (why, refused.text)
        assert seen() == before, why
    # The same body, signed by the peer, is taken.
    taken = notify(real.sign(body, "e4"))
    assert taken.status_code == 200 and taken.json() == {"ok": True}
    after = seen()
    assert after[0][2] > before[0][2]  # the peer's task was read (GetTask) and recorded
    assert server.log().count("a notification for") == len(forged)
