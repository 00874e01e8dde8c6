"""Where peers tell us their tasks moved: `POST /peers/notify/<task>/<delegation>`, the push
config this service registered when it delegated. The call must carry the token we gave
(`X-A2A-Notification-Token`), and when the peer signs, a signature that verifies against the
peer's JWKS. Its body is only a wake-up: the peer's task is then read with GetTask."""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Callable
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_agent.delivery.deliverer import TOKEN_HEADER
from a2a_agent.delivery.signing import SIGNATURE_HEADER, verify_notification
from a2a_agent.engine.peer_watch import PeerWatch
from a2a_agent.peers import PeerError

log = logging.getLogger(__name__)
MAX_BODY = 1 << 20
PEER_NOTIFY_PREFIX = "/peers/notify/"
JWKS_TTL_S = 300.0


def peer_routes(watch: PeerWatch, tag: Callable[[str], str]) -> list[Route]:
    jwks_cache: dict[str, tuple[float, dict[str, Any]]] = {}

    async def jwks_of(url: str) -> dict[str, Any]:
        cached = jwks_cache.get(url)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        async with httpx.AsyncClient(timeout=10) as http:
            found = (await http.get(url + "/.well-known/jwks.json")).json()
        jwks_cache[url] = (time.monotonic() + JWKS_TTL_S, found)
        return dict(found)

    async def notify(request: Request) -> Response:
        task_id, did = request.path_params["task_id"], request.path_params["delegation"]
        token = request.headers.get(TOKEN_HEADER, "")
        if not hmac.compare_digest(token, tag(f"{task_id}/{did}")):
            return JSONResponse({"error": "not a notification this service asked for"}, 401)
        body = b""
        async for chunk in request.stream():  # never more than MAX_BODY in memory
            body += chunk
            if len(body) > MAX_BODY:
                return JSONResponse({"error": "too large"}, 413)
        found = await watch.store.delegation(task_id, did)
        if found is None or found.peer is None:
            return JSONResponse({"error": "no such delegation"}, 404)
        signature = request.headers.get(SIGNATURE_HEADER)
        if signature:
            try:
                peer = watch.peers.peer(found.peer)
                why = verify_notification(signature, body, await jwks_of(peer.url), now=time.time())
            except (PeerError, httpx.HTTPError, ValueError) as exc:
                why = f"the peer's keys could not be read ({exc})"
            if why is not None:
                log.warning("a notification for %s/%s was refused: %s", task_id, did, why)
                return JSONResponse({"error": why}, 401)
        await watch.refresh(task_id, did)
        return JSONResponse({"ok": True})

    return [Route(PEER_NOTIFY_PREFIX + "{task_id}/{delegation}", notify, methods=["POST"])]
