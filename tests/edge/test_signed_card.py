"""The card is signed (A2A 1.0: a JWS over its JCS form) with the deployment's key, whose
public half is in the JWKS the signature names; the SDK's own verifier takes it, and refuses
the card once anything in it is changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from a2a.client import A2ACardResolver
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from google.protobuf.json_format import ParseDict
from jwt import PyJWK
from jwt.utils import base64url_decode

from tests.support.in_process import BASE_URL, in_process


def key_provider(jwks: dict[str, Any], jwks_url: str) -> Any:
    def provide(kid: str | None, jku: str | None) -> PyJWK:
        assert jku == jwks_url  # the signature names where its key is published
        (key,) = [k for k in jwks["keys"] if k["kid"] == kid]
        return PyJWK(key)

    return provide


async def test_the_card_is_signed_and_an_altered_card_is_not(database_url: str, home: Path) -> None:
    async with in_process(database_url, home) as app:
        jwks = (await app.http.get("/.well-known/jwks.json")).json()
        verify = create_signature_verifier(
            key_provider(jwks, BASE_URL + "/.well-known/jwks.json"), ["ES256"]
        )
        resolver = A2ACardResolver(app.http, BASE_URL)
        card = await resolver.get_agent_card(signature_verifier=verify)  # raises if unsigned
        (signature,) = card.signatures
        header = json.loads(base64url_decode(signature.protected.encode()))
        assert header["alg"] == "ES256" and header["kid"] in {k["kid"] for k in jwks["keys"]}

        # The same signature on a card whose words or limits were changed does not verify.
        served = (await app.http.get("/.well-known/agent-card.json")).json()
        for change in (
            {"description": served["description"] + " (and more)"},
            {"supportedInterfaces": served["supportedInterfaces"][:1]},
        ):
            altered = ParseDict({**served, **change}, AgentCard(), ignore_unknown_fields=True)
            with pytest.raises(InvalidSignaturesError):
                verify(altered)
        # The card as served, parsed the same way, verifies: the change is what fails.
        verify(ParseDict(served, AgentCard(), ignore_unknown_fields=True))

        # Every request gets the same signed card (signed once per key), and its ETag holds.
        again = await app.http.get("/.well-known/agent-card.json")
        assert again.json()["signatures"] == served["signatures"]
