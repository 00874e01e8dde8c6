"""The HTTP+JSON (REST) binding's form of a version mismatch: a 1.0 path called without
`A2A-Version: 1.0` (the SDK then assumes 0.3 and says only "0.3 is not supported ... expected
1.0"), or a 0.3 path (`/v1/...`) called with it. The answer says which header to send, or
which path the other version has, in the binding's error body (AIP-193, HTTP 400, the SDK's
status and reason for VersionNotSupported).

It wraps the SDK's REST routes themselves, so only a request the router gave to one of them
is checked: the dashboard's `/ui/tasks/...` and our other routes are never mistaken for a
tenant's `/{tenant}/tasks/...`.
"""

from __future__ import annotations

from a2a.types import TaskState
from a2a.utils.errors import InvalidParamsError, VersionNotSupportedError
from starlette.datastructures import QueryParams
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from a2a_agent.edge.refusals import Refusal, header, refuse
from a2a_agent.edge.versions import V03, V10, Protocol, version_of_header

V03_PREFIX = "/v1"
LIST_PATH = "/tasks"  # ListTasks' route in the SDK's 1.0 REST routes
# Each 1.0 route (method, path) and its 0.3 path, None where 0.3 has no such call.
V10_TO_V03: dict[tuple[str, str], str | None] = {
    ("POST", "/message:send"): "/v1/message:send",
    ("POST", "/message:stream"): "/v1/message:stream",
    ("POST", "/tasks/{id}:cancel"): "/v1/tasks/{id}:cancel",
    ("GET", "/tasks/{id}:subscribe"): "/v1/tasks/{id}:subscribe",
    ("POST", "/tasks/{id}:subscribe"): "/v1/tasks/{id}:subscribe",
    ("GET", "/tasks/{id}"): "/v1/tasks/{id}",
    ("GET", "/tasks/{id}/pushNotificationConfigs/{push_id}"): (
        "/v1/tasks/{id}/pushNotificationConfigs/{push_id}"
    ),
    ("DELETE", "/tasks/{id}/pushNotificationConfigs/{push_id}"): None,
    ("POST", "/tasks/{id}/pushNotificationConfigs"): "/v1/tasks/{id}/pushNotificationConfigs",
    ("GET", "/tasks/{id}/pushNotificationConfigs"): "/v1/tasks/{id}/pushNotificationConfigs",
    ("GET", "/tasks"): None,
    ("GET", "/extendedAgentCard"): "/v1/card",
}
V03_TO_V10 = {(verb, old): new for (verb, new), old in V10_TO_V03.items() if old is not None}


STATES = {name: number for name, number in TaskState.items() if number}


def unknown_status(values: list[str]) -> str | None:
    """Why a ListTasks `status` query names no task state, or None. protobuf's parser, as
    the SDK calls it, drops an enum value it does not know, and every task was listed."""
    for value in values:
        if value not in STATES:
            return f"status {value!r} is not a task state; give one of {', '.join(STATES)}"
    return None


def rest_version_mismatch(
    verb: str, path_format: str, params: dict[str, str], path: str, version: Protocol
) -> str | None:
    """What to change when the route `path_format` belongs to the other version than the
    request's header says (None when they agree)."""
    if path_format.startswith(V03_PREFIX):
        if version != V10:
            return None
        at_10 = V03_TO_V10.get((verb, path_format))
        use = f"use {verb} {at_10.format(**params)}, or " if at_10 else ""
        return (
            f"{verb} {path} is a path of A2A 0.3's HTTP+JSON binding, and this request says "
            f"A2A-Version 1.0: {use}send no A2A-Version header to speak 0.3"
        )
    if version != V03:
        return None
    at_03 = V10_TO_V03.get((verb, path_format))
    then = (
        f", whose path for this is {verb} {at_03.format(**params)}"
        if at_03
        else ", which has no such call"
    )
    return (
        f"{verb} {path} is A2A 1.0's HTTP+JSON binding: send the header A2A-Version: 1.0; a "
        f"request without it speaks A2A 0.3{then}"
    )


class VersionHint:
    """One SDK REST route's app, behind the check of the request's version."""

    def __init__(self, app: ASGIApp, path_format: str, jsonrpc_path: str) -> None:
        self.app = app
        self.path_format = path_format
        self.jsonrpc_path = jsonrpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            version = version_of_header(header(scope, b"a2a-version"))
            params = {k: str(v) for k, v in scope.get("path_params", {}).items() if k != "tenant"}
            said = rest_version_mismatch(
                scope["method"], self.path_format, params, scope["path"], version
            )
            if said is not None:
                refusal = Refusal.of(VersionNotSupportedError(said))
                await refuse(scope, send, refusal, jsonrpc_path=self.jsonrpc_path)
                return
            if scope["method"] == "GET" and self.path_format == LIST_PATH:
                # The SDK's ListTasks route, at `/tasks` and under a tenant's `/{tenant}`.
                query = QueryParams(scope["query_string"]).getlist("status")
                said = unknown_status(query)
                if said is not None:
                    refusal = Refusal.of(InvalidParamsError(said))
                    await refuse(scope, send, refusal, jsonrpc_path=self.jsonrpc_path)
                    return
        await self.app(scope, receive, send)


def with_version_hints(routes: list[BaseRoute], *, jsonrpc_path: str) -> list[BaseRoute]:
    """The SDK's REST `routes`, each checking the request's version first. The routes under
    its `/{tenant}` mount are the same objects, so they are wrapped with these."""
    for route in routes:
        if isinstance(route, Route):
            route.app = VersionHint(route.app, route.path_format, jsonrpc_path)
    return routes
