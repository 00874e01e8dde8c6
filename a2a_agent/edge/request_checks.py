"""Checks on a request before it is read: what its body claims to be."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

JSON_TYPES = (b"application/json", b"application/a2a+json")
WITH_BODY = ("POST", "PUT", "PATCH")


class StrictContentType:
    """A request with a body must say it is JSON (`Content-Type: application/json`); a form
    or `text/plain` POST is what a browser page sends to a server it should not reach."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in WITH_BODY:
            declared = b""
            for name, value in scope["headers"]:
                if name == b"content-type":
                    declared = value.split(b";", 1)[0].strip().lower()
                    break
            if declared not in JSON_TYPES:
                body = json.dumps(
                    {
                        "error": "send the request body as JSON with 'Content-Type: "
                        f"application/json' (got {declared.decode('latin-1') or 'none'!r})"
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 415,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
