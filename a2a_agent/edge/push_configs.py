"""The four push-config methods of our RequestHandler, and the inline config's registration:
webhooks kept per task owner, each URL checked by the SSRF guard first.

A config remembers the A2A version of the client that made it (its notifications' shape:
`delivery/payloads.py`). Its authentication scheme `HMAC-SHA256` (or `hmac_sha256`) asks for
HMAC-signed notifications, the secret as the credentials (a 0.3 client: `schemes:
["HMAC-SHA256"]`); the secret is sealed at rest like any credentials, and no read shows it.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InternalError, InvalidParamsError

from a2a_agent.delivery.guard import AllowList, UrlRefused, check_url
from a2a_agent.delivery.signing import HMAC_SCHEME, hmac_key, is_hmac_scheme
from a2a_agent.edge import scopes
from a2a_agent.edge.route_params import control_character
from a2a_agent.edge.versions import V10, protocol_of
from persistence.errors import StoreUnavailable
from persistence.push import PushConfig, PushConfigStore
from persistence.records import TaskRow


def printable(value: str, what: str) -> None:
    """An identifier with a NUL (or another control character) names nothing stored here;
    say so instead of handing it to the database."""
    if any(ord(c) < 32 for c in value):
        raise InvalidParamsError(f"{what} contains a control character; no such id exists")


HEADER = "which cannot travel in an HTTP header"
# A config's texts, what each is called, and why a control character cannot be in it.
CONFIG_TEXTS = (
    ("id", "the push config id", "which a push config id may not hold"),
    ("url", "the webhook URL", "which a URL may not hold"),
    ("token", "the token", f"{HEADER} (X-A2A-Notification-Token)"),
)


def _control(value: str) -> str | None:
    """The first control character in `value`, as a refusal names it, or None."""
    for c in value:
        if c == "\x00":
            return "a NUL character (\\u0000)"
        if control_character(c):
            return f"a control character (U+{ord(c):04X})"
    return None


def unstorable(params: TaskPushNotificationConfig) -> str | None:
    """Why a config to be made cannot be kept or used as given, naming the field; or None.

    A NUL cannot be stored, and the token and authentication travel as headers of every
    notification, where no control character may; an id with one could not be named again."""
    texts = [(getattr(params, field), what, why) for field, what, why in CONFIG_TEXTS]
    if params.HasField("authentication"):
        auth = params.authentication
        texts.append((auth.scheme, "authentication.scheme", f"{HEADER} (Authorization)"))
        if not is_hmac_scheme(auth.scheme):  # an HMAC secret is a key, never sent
            texts.append(
                (auth.credentials, "authentication.credentials", f"{HEADER} (Authorization)")
            )
    for value, what, why in texts:
        found = _control(value)
        if found is not None:
            return f"{what} contains {found}, {why}; remove it"
    return None


def _config_out(config: PushConfig, *, with_secrets: bool = False) -> TaskPushNotificationConfig:
    """A config as the caller sees it: its token and credentials only in the answer to the
    call that set them (a later read, a log of it or a screen shows none)."""
    out = TaskPushNotificationConfig(
        task_id=config.task_id,
        id=config.id,
        url=config.url,
        token=(config.token or "") if with_secrets else "",
    )
    auth = config.authentication or {}
    if auth.get("scheme"):
        out.authentication.scheme = str(auth["scheme"])
        if with_secrets:
            out.authentication.credentials = str(auth.get("credentials", ""))
    return out


class PushConfigMethods:
    push: PushConfigStore
    allow: AllowList

    async def _load(self, task_id: str, owner: str) -> TaskRow:
        raise NotImplementedError  # the handler's

    async def _checked_config(self, params: TaskPushNotificationConfig) -> None:
        """Refuse a config that could not be kept or used (InvalidParamsError): a control
        character where none may be, a URL the guard refuses, an HMAC secret that is none.
        Checked before anything is stored: an inline config is checked before its task is
        made, so a refused one leaves no task behind."""
        refusal = unstorable(params)
        if refusal is not None:
            raise InvalidParamsError(refusal)
        try:
            await check_url(params.url, self.allow)
        except UrlRefused as exc:
            raise InvalidParamsError(str(exc)) from exc
        auth = params.authentication if params.HasField("authentication") else None
        if auth is not None and is_hmac_scheme(auth.scheme):
            try:
                hmac_key(auth.credentials)
            except ValueError as exc:
                raise InvalidParamsError(
                    f"{exc}: give the secret as the authentication's credentials"
                ) from exc

    async def _register(
        self,
        task_id: str,
        owner: str,
        params: TaskPushNotificationConfig,
        *,
        from_seq: int,
        protocol: str = V10,
    ) -> TaskPushNotificationConfig:
        """Store a config made by a client of A2A `protocol` ("0.3" or "1.0")."""
        await self._checked_config(params)
        auth = params.authentication if params.HasField("authentication") else None
        scheme = auth.scheme if auth is not None else ""
        if auth is not None and is_hmac_scheme(scheme):
            scheme = HMAC_SCHEME
        config = PushConfig(
            task_id=task_id,
            id=params.id or str(uuid.uuid4()),
            url=params.url,
            token=params.token or None,
            authentication={"scheme": scheme, "credentials": auth.credentials}
            if auth is not None and scheme
            else None,
            protocol=protocol,
        )
        try:
            stored = await self.push.put(config, owner, from_seq=from_seq)
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; the push config was not stored, try again") from exc
        return _config_out(replace(stored, token=config.token), with_secrets=True)

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        caller = scopes.owner(context, "read")
        row = await self._load(params.task_id, caller)
        # From now on: the task's events so far are in GetTask; a config given with the
        # first message (SendMessage's configuration) gets every event.
        return await self._register(
            row.task_id, caller, params, from_seq=row.event_seq, protocol=protocol_of(context)
        )

    async def _configs(self, task_id: str, owner: str, config_id: str | None) -> list[PushConfig]:
        await self._load(task_id, owner)
        printable(config_id or "", "the push config id")
        try:
            return await self.push.configs(task_id, owner, config_id)
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; try again shortly") from exc

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        found = await self._configs(
            params.task_id, scopes.owner(context, "read"), params.id or None
        )
        if not found:
            raise InvalidParamsError(f"task {params.task_id} has no push config {params.id!r}")
        return _config_out(found[0])

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        found = await self._configs(params.task_id, scopes.owner(context, "read"), None)
        return ListTaskPushNotificationConfigsResponse(configs=[_config_out(c) for c in found])

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        """Idempotent (A2A 1.0 §3.1.10): a config already deleted, or never made, on a task
        of the caller's is deleted all the same; an unknown task is TaskNotFound."""
        caller = scopes.owner(context, "read")
        await self._load(params.task_id, caller)
        printable(params.id, "the push config id")
        try:
            await self.push.delete(params.task_id, caller, params.id)
        except StoreUnavailable as exc:
            raise InternalError(f"{exc}; the push config was not deleted, try again") from exc
