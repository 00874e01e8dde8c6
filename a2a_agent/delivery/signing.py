"""Signed notifications: each push carries a JWT (ES256) over the SHA-256 of its body, made
with a key every process of this deployment shares (in the database); its public half is
served as a JWKS at /.well-known/jwks.json, so a receiver can tell a notification came from
us and was not altered.

The JWT travels in `X-A2A-Notification-Signature`. Its claims: `iss` (this agent's URL),
`iat`, `exp` (5 minutes later), `jti` (the event id) and `body_sha256` (hex). To verify: fetch
the JWKS, pick the key by the JWT's `kid`, check the signature, `exp` and `iss`, and compare
`body_sha256` with the SHA-256 of the body as received.

A config may also ask for an HMAC-SHA256 signature with a secret of its own (its
authentication scheme `HMAC-SHA256`, the secret as its credentials; `hmac_headers`). Each
attempt is signed at its send time, in two forms:

- Standard Webhooks: `webhook-id` (the event id), `webhook-timestamp` (Unix seconds) and
  `webhook-signature: v1,<base64 of HMAC(secret, "<id>.<timestamp>.<body>")>`;
- `X-A2A-Signature: <hex of HMAC(secret, "<timestamp>.<body>")>` with
  `X-A2A-Signature-Timestamp: <timestamp>`, the header pair CrewAI's webhook signature
  config names (5 minutes of tolerance there).

The key is the secret's UTF-8 bytes, or, for a Standard Webhooks secret (`whsec_<base64>`),
the bytes it encodes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
import uuid
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from persistence.push import SigningKeys

SIGNATURE_HEADER = "X-A2A-Notification-Signature"
LIFETIME_S = 300
HMAC_SCHEME = "HMAC-SHA256"
HMAC_MIN_BYTES = 16
STANDARD_PREFIX = "whsec_"


def is_hmac_scheme(scheme: str | None) -> bool:
    """Whether a config's authentication scheme asks for an HMAC-SHA256 signature (also in
    CrewAI's spelling of the mode, `hmac_sha256`)."""
    return (scheme or "").strip().upper().replace("_", "-") == HMAC_SCHEME


def hmac_key(secret: str) -> bytes:
    """The HMAC key of a config's secret: a Standard Webhooks secret (`whsec_<base64>`) is
    the bytes it encodes, any other its UTF-8 bytes. ValueError if it is too short."""
    key = secret.encode()
    if secret.startswith(STANDARD_PREFIX):
        try:
            key = base64.b64decode(secret[len(STANDARD_PREFIX) :], validate=True)
        except binascii.Error as exc:
            raise ValueError(f"a {STANDARD_PREFIX} secret must be base64") from exc
    if len(key) < HMAC_MIN_BYTES:
        raise ValueError(f"an HMAC-SHA256 secret must be at least {HMAC_MIN_BYTES} bytes")
    return key


def hmac_headers(secret: str, event_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """The signature headers of one attempt (both forms, one timestamp)."""
    key = hmac_key(secret)
    stamp = str(timestamp)
    standard = hmac.new(key, f"{event_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    a2a = hmac.new(key, f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return {
        "webhook-id": event_id,
        "webhook-timestamp": stamp,
        "webhook-signature": "v1," + base64.b64encode(standard).decode(),
        "X-A2A-Signature": a2a,
        "X-A2A-Signature-Timestamp": stamp,
    }


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

    def current_key(self) -> tuple[str, ec.EllipticCurvePrivateKey]:
        """The key this process signs with now, and its id in the JWKS (the agent card is
        signed with it too: one key the deployment keeps, one JWKS to verify both)."""
        assert self._key is not None, "Signer.load first"
        return self._kid, self._key

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


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def verify_notification(token: str, body: bytes, jwks: dict[str, Any], *, now: float) -> str | None:
    """Check a notification's JWT (as `Signer.sign` makes it) against the sender's JWKS and the
    body as received: None if it holds, else why not."""
    try:
        head_b64, claims_b64, signature_b64 = token.split(".")
        header = json.loads(_unb64(head_b64))
        claims = json.loads(_unb64(claims_b64))
        signature = _unb64(signature_b64)
    except (ValueError, TypeError):
        return "the signature is not a JWT"
    if header.get("alg") != "ES256" or len(signature) != 64:
        return "the signature is not ES256"
    key = next((k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")), None)
    if key is None:
        return f"the signing key {header.get('kid')!r} is not in the sender's JWKS"
    public = ec.EllipticCurvePublicNumbers(
        int.from_bytes(_unb64(key["x"]), "big"), int.from_bytes(_unb64(key["y"]), "big"),
        ec.SECP256R1(),
    ).public_key()  # fmt: skip
    der = encode_dss_signature(
        int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    )
    try:
        public.verify(der, f"{head_b64}.{claims_b64}".encode(), ec.ECDSA(hashes.SHA256()))
    except InvalidSignature:
        return "the signature does not verify"
    if float(claims.get("exp", 0)) < now:
        return "the signature has expired"
    if claims.get("body_sha256") != hashlib.sha256(body).hexdigest():
        return "the body is not the one that was signed"
    return None
