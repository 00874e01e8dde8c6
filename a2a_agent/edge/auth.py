"""Who is calling: API keys, checked before anything else reads the request.

A key is `a2a_<id>_<secret>`, sent as `Authorization: Bearer <key>`. The store keeps the
principal, the scopes and a SHA-256 of the secret (the secret is 256 random bits, so a
plain hash is enough; nothing slower is needed to resist guessing). Each process remembers a
verified key for `ttl_s`, so a revoked key stops working within that time; GetTask, the call
made most, costs no query for its key.

`RequireKey` answers 401 to any request without a valid key, except the public paths (the
card, health, the JWKS receivers verify with, the schemas the card links to). It puts the
principal where the a2a-sdk looks for the caller (`scope["user"]`, its `display_name` is
the tasks' owner) and the scopes in `scope["auth"]`; the handler checks scopes per method.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from functools import partial

from starlette.authentication import AuthCredentials, SimpleUser
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.refusals import refuse, unauthenticated, unavailable
from persistence.errors import StoreError
from persistence.keys import KeyStore, StoredKey

SCOPES = ("read", "submit", "run", "approve", "operator")
DEFAULT_SCOPES = ("read", "submit", "approve")  # `run` (commands of the caller's) on request
PUBLIC_PATHS = frozenset({"/healthz", "/readyz"})
# A peer's notification carries the token this service gave it (edge/peer_hooks.py).
PUBLIC_PREFIXES = ("/.well-known/", "/schemas/", "/peers/notify/")
OPEN_PRINCIPAL = ""  # the owner of every task when authentication is off
# The dashboard: a browser sends the key it logged in with as this cookie (HttpOnly,
# SameSite=Strict, path /ui); its login page is the one open page.
UI_PREFIX = "/ui"


def on_dashboard(path: str) -> bool:
    """Whether `path` is one of the dashboard's (`/ui` and below)."""
    return path == UI_PREFIX or path.startswith(UI_PREFIX + "/")


UI_COOKIE = "a2a_agent_key"
UI_LOGIN = "/ui/login"


@dataclass(frozen=True)
class Caller:
    principal: str
    scopes: frozenset[str]
    key_id: str | None


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_key(principal: str, scopes: tuple[str, ...], name: str = "") -> tuple[str, StoredKey]:
    """A fresh key: the text to hand out (shown once) and what is stored of it."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise ValueError(f"unknown scope(s) {', '.join(unknown)}; scopes are {', '.join(SCOPES)}")
    if not principal.strip():
        raise ValueError("a key needs a principal (the owner of the tasks it creates)")
    key_id, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    stored = StoredKey(key_id, principal, name, tuple(scopes), secret_hash(secret))
    return f"a2a_{key_id}_{secret}", stored


def parse_key(text: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    prefix, _, rest = text.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != "a2a" or len(key_id) != 12 or not secret:
        return None
    return key_id, secret


class KeyVerifier:
    def __init__(self, store: KeyStore, *, ttl_s: float = 2.0, max_cached: int = 10_000) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self.max_cached = max_cached
        self._cache: dict[str, tuple[float, Caller | None]] = {}
        # One lookup per key at a time: when an entry runs out, the requests arriving
        # meanwhile wait for that one query instead of each sending its own (at 10,000
        # requests/s, 50 at once every ttl_s: a p99 of 105 ms against 12 ms, measured).
        self._looking: dict[str, asyncio.Task[Caller | None]] = {}

    async def caller(self, token: str) -> Caller | None:
        """The caller a key stands for; None for a wrong, unknown or revoked key."""
        cached = self._cache.get(token)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        looking = self._looking.get(token)
        if looking is None:
            looking = asyncio.get_running_loop().create_task(self._look_up(token))
            self._looking[token] = looking
            looking.add_done_callback(partial(self._looked, token))
        # A caller that gives up (its client went away) leaves the lookup to the others.
        return await asyncio.shield(looking)

    def _looked(self, token: str, looking: asyncio.Task[Caller | None]) -> None:
        self._looking.pop(token, None)
        if not looking.cancelled():
            looking.exception()  # retrieved here too: every waiter may have given up

    async def _look_up(self, token: str) -> Caller | None:
        parsed = parse_key(token)
        found: Caller | None = None
        if parsed is not None:
            stored = await self.store.key(parsed[0])
            if (
                stored is not None
                and not stored.revoked
                and hmac.compare_digest(stored.secret_hash, secret_hash(parsed[1]))
            ):
                found = Caller(stored.principal, frozenset(stored.scopes), stored.id)
        if len(self._cache) >= self.max_cached:
            self._cache.clear()
        self._cache[token] = (time.monotonic() + self.ttl_s, found)
        return found


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def _cookie(scope: Scope, name: str) -> str:
    for header, value in scope["headers"]:
        if header == b"cookie":
            for pair in value.decode("latin-1").split(";"):
                key, _, found = pair.strip().partition("=")
                if key == name:
                    return str(found)
    return ""


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})


class RequireKey:
    """Authenticate every HTTP request but the public ones (or let all in, when open)."""

    def __init__(
        self, app: ASGIApp, *, verifier: KeyVerifier | None, jsonrpc_path: str = "/"
    ) -> None:
        self.app = app
        self.verifier = verifier  # None: authentication is off (A2A_AGENT_INSECURE_OPEN)
        self.jsonrpc_path = jsonrpc_path

    async def _unauthenticated(self, scope: Scope, send: Send, message: str) -> None:
        await refuse(
            scope,
            send,
            unauthenticated(message),
            jsonrpc_path=self.jsonrpc_path,
            headers=((b"www-authenticate", b'Bearer realm="a2a-agent"'),),
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.verifier is None:
            caller: Caller | None = Caller(OPEN_PRINCIPAL, frozenset(SCOPES), None)
        elif _public(scope["path"]):
            caller = None
        else:
            header = ""
            for name, value in scope["headers"]:
                if name == b"authorization":
                    header = value.decode("latin-1")
                    break
            scheme, _, token = header.partition(" ")
            ui = on_dashboard(scope["path"])
            if ui and not header:
                scheme, token = "bearer", _cookie(scope, UI_COOKIE)
                if scope["path"] == UI_LOGIN:
                    await self.app(scope, receive, send)  # the login page itself is open
                    return
                if not token:
                    await _redirect(send, UI_LOGIN)
                    return
            if scheme.lower() != "bearer" or not token.strip():
                await self._unauthenticated(
                    scope,
                    send,
                    "an API key is required: send 'Authorization: Bearer <key>' (a local "
                    "server's admin key is in A2A_AGENT_HOME/admin.key)",
                )
                return
            try:
                caller = await self.verifier.caller(token.strip())
            except StoreError:
                text = "cannot check the API key: the database is unavailable; try again shortly"
                await refuse(scope, send, unavailable(text), jsonrpc_path=self.jsonrpc_path)
                return
            if caller is None:
                if ui and not header:
                    await _redirect(send, UI_LOGIN + "?expired=1")
                    return
                await self._unauthenticated(
                    scope, send, "this API key is not valid (unknown or revoked)"
                )
                return
        if caller is not None:
            scope["user"] = SimpleUser(caller.principal)
            scope["auth"] = AuthCredentials(sorted(caller.scopes))
        await self.app(scope, receive, send)
