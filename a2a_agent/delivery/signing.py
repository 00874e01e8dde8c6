"""Signed notifications: each push carries a JWT (ES256) over the SHA-256 of its body, made
with a key every process of this deployment shares (in the database); its public half is
served as a JWKS at /.well-known/jwks.json, so a receiver can tell a notification came from
us and was not altered.

The JWT travels in `X-A2A-Notification-Signature`. Its claims: `iss` (this agent's URL),
`iat`, `exp` (5 minutes later), `jti` (the event id) and `body_sha256` (hex). To verify: fetch
the JWKS, pick the key by the JWT's `kid`, check the signature, `exp` and `iss`, and compare
`body_sha256` with the SHA-256 of the body as received.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from persistence.push import SigningKeys

SIGNATURE_HEADER = "X-A2A-Notification-Signature"
LIFETIME_S = 300


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _coordinate(n: int) -> str:
    return _b64(n.to_bytes(32, "big"))


class Signer:
    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self._kid = ""
        self._key: ec.EllipticCurvePrivateKey | None = None
        self._public: list[tuple[str, ec.EllipticCurvePublicKey]] = []

    async def load(self, keys: SigningKeys) -> None:
        """The newest shared key, made (once, by whichever process comes first) if none."""
        found = await keys.signing_keys()
        if not found:
            key = ec.generate_private_key(ec.SECP256R1())
            pem = key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ).decode()
            await keys.add_signing_key(uuid.uuid4().hex[:16], pem)
            found = await keys.signing_keys()
        loaded = []
        for kid, pem in found:
            private = serialization.load_pem_private_key(pem.encode(), password=None)
            assert isinstance(private, ec.EllipticCurvePrivateKey)
            loaded.append((kid, private))
        self._kid, self._key = loaded[0]
        self._public = [(kid, k.public_key()) for kid, k in loaded]

    def sign(self, body: bytes, event_id: str) -> str:
        assert self._key is not None, "Signer.load first"
        now = int(time.time())
        header = {"alg": "ES256", "typ": "JWT", "kid": self._kid}
        claims = {
            "iss": self.issuer,
            "iat": now,
            "exp": now + LIFETIME_S,
            "jti": event_id,
            "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        signing_input = (
            _b64(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64(json.dumps(claims, separators=(",", ":")).encode())
        )
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return signing_input + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, public in self._public:
            numbers = public.public_numbers()
            keys.append(
                {
                    "kty": "EC",
                    "crv": "P-256",
                    "x": _coordinate(numbers.x),
                    "y": _coordinate(numbers.y),
                    "kid": kid,
                    "use": "sig",
                    "alg": "ES256",
                }
            )
        return {"keys": keys}
