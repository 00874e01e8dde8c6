"""What a person does from the dashboard, done as an A2A caller would: a decision is a reply,
a note is a text message to the working task, a cancel is CancelTask, a continuation is a new
message. Each goes through the same handler an A2A request does, acting for the task's owner,
and each is recorded with the person's principal: a decision's `decided_by`, a message's
metadata (`sentBy`), and for a cancel (which carries nothing of who asked) a transition
naming them."""

from __future__ import annotations

import json
import uuid
from typing import Any

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
)
from a2a.utils.errors import A2AError
from google.protobuf.struct_pb2 import Struct, Value
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_agent.edge.auth import SCOPES
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.route_params import control_character
from persistence.errors import StoreError
from persistence.operator import OperatorStore
from persistence.push import PushOutbox

VIA = "dashboard"


class _Acting(User):
    """The task's owner, as whom the dashboard acts (the person is recorded apart)."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def person_of(request: Request) -> tuple[str, bool]:
    """(principal, is an operator) of the request's key."""
    scopes = set(getattr(request.scope.get("auth"), "scopes", ()) or ())
    user = request.scope.get("user")
    name = user.display_name if user is not None and user.is_authenticated else ""
    return name, "operator" in scopes


def refused(said: str) -> JSONResponse:
    """A request the dashboard cannot act on, in the form its buttons read (`{"error": ...}`)."""
    return JSONResponse({"error": said}, status_code=400)


async def json_object(request: Request) -> dict[str, Any] | Response:
    """The request's body as a JSON object (an empty body is `{}`), or the refusal saying it
    is not one."""
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        return refused(f"the body is not JSON (at {where}); send a JSON object")
    except ValueError:  # not UTF-8: the door refuses that first (`RequestLimits`)
        return refused("the body is not JSON; send a JSON object")
    if not isinstance(body, dict):
        return refused("the body must be a JSON object")
    return body


def _message(
    task_id: str, person: str, *, data: dict[str, Any] | None = None, text: str | None = None
) -> Message:
    parts = []
    if text is not None:
        parts.append(Part(text=text))
    if data is not None:
        value = Value()
        value.struct_value.update(data)
        parts.append(Part(data=value, media_type="application/json"))
    metadata = Struct()
    metadata.update({"sentBy": person, "via": VIA})
    return Message(
        message_id=f"ui-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=parts,
        metadata=metadata,
    )


def _send(message: Message) -> SendMessageRequest:
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )


class Actions:
    def __init__(
        self, *, handler: AgentRequestHandler, operator: OperatorStore, outbox: PushOutbox
    ) -> None:
        self.handler = handler
        self.operator = operator
        self.outbox = outbox

    async def _context(self, task_id: str, person: str) -> ServerCallContext:
        row = await self.operator.task(task_id)
        if row is None:
            raise LookupError(task_id)
        return ServerCallContext(
            user=_Acting(row.owner),
            state={"auth": AuthCredentials(list(SCOPES)), "headers": {}, "decided_by": person},
        )

    async def act(self, request: Request) -> Response:
        person, operator = person_of(request)
        if not operator:
            return JSONResponse({"error": "the dashboard needs the 'operator' scope"}, 403)
        person = person or "operator"
        task_id, action = request.path_params["task_id"], request.path_params["action"]
        body = await json_object(request)
        if isinstance(body, Response):
            return body
        try:
            context = await self._context(task_id, person)
            return await self._do(action, task_id, person, body, context)
        except LookupError:
            return JSONResponse({"error": f"no task {task_id}"}, status_code=404)
        except A2AError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)

    async def _do(
        self,
        action: str,
        task_id: str,
        person: str,
        body: dict[str, Any],
        context: ServerCallContext,
    ) -> Response:
        if action == "decide":
            approval = {
                "id": body.get("request_id"),
                "decision": body.get("decision"),
                **({"note": body["note"]} if body.get("note") else {}),
            }
            message = _message(task_id, person, data={"approval": approval})
            task = await self.handler.on_message_send(_send(message), context)
            return JSONResponse({"ok": True, "task": getattr(task, "id", task_id)})
        if action == "note":
            text = body.get("text") or ""
            if not isinstance(text, str):
                return refused('send the note as a text: {"text": "..."}')
            text = text.strip()
            if not text:
                return JSONResponse({"error": "the note is empty"}, status_code=400)
            # A text to a working task: the steering note the model reads, as from A2A.
            await self.handler.on_message_send(_send(_message(task_id, person, text=text)), context)
            return JSONResponse({"ok": True})
        if action == "cancel":
            await self.handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
            await self.operator.record(task_id, f"canceled from the {VIA} by {person}")
            return JSONResponse({"ok": True})
        if action == "continue":
            message = _message("", person, data={"continue": True})
            message.reference_task_ids.append(task_id)
            made = await self.handler.on_message_send(_send(message), context)
            return JSONResponse({"ok": True, "task": getattr(made, "id", None)})
        if action == "retry-push":
            config_id = body.get("config_id")
            if config_id is not None and not isinstance(config_id, str):
                return refused("config_id must be a push config's id (a text), or absent to "
                               "retry each of the task's dead pushes")  # fmt: skip
            if config_id is not None and control_character(config_id):
                return refused("config_id contains a control character (such as NUL), which "
                               "no push config's id has")  # fmt: skip
            retried = await self.outbox.retry(task_id, config_id)
            return JSONResponse({"ok": True, "retried": retried})
        return JSONResponse({"error": f"no action {action!r}"}, status_code=404)
