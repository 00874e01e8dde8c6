"""The dashboard at /ui: server-rendered pages an operator watches and steers runs from.

A person logs in with an API key that has the `operator` scope (the key becomes an HttpOnly,
SameSite=Strict cookie; `RequireKey` checks it on every /ui request as it checks a bearer
key). The pages read the rows (any owner's tasks); every action goes through the same
handler an A2A caller's request does (an approval is a reply, a cancel is CancelTask, a
continuation is a new message), acting for the task's owner and recorded with the person's
principal. A task page follows its run live: an SSE stream wakes on the task's NOTIFY and the
page fetches its body again.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
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
from google.protobuf.struct_pb2 import Value
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.authentication import AuthCredentials
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from a2a_agent.edge.auth import SCOPES, UI_COOKIE, KeyVerifier
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.harness.render import progress_document, transition_line
from a2a_agent.ui import views
from a2a_agent.wire import to_wire
from persistence.errors import StoreError
from persistence.operator import OperatorStore
from persistence.push import PushConfigStore, PushOutbox
from persistence.runs import RunStore
from persistence.tasks import TaskStore

TEMPLATES = Path(__file__).parent / "templates"
STATES = ("submitted", "working", "input_required", "completed", "failed", "canceled", "rejected")
LIVE_POLL_S = 15.0  # an SSE comment this often keeps proxies from closing the stream


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


def _person(request: Request) -> tuple[str, bool]:
    """(principal, is an operator) of the request's key."""
    scopes = set(getattr(request.scope.get("auth"), "scopes", ()) or ())
    user = request.scope.get("user")
    name = user.display_name if user is not None and user.is_authenticated else ""
    return name, "operator" in scopes


class Dashboard:
    def __init__(
        self,
        *,
        handler: AgentRequestHandler,
        tasks: TaskStore,
        runs: RunStore,
        operator: OperatorStore,
        push: PushConfigStore,
        outbox: PushOutbox,
        verifier: KeyVerifier | None,
        pause_pct: int,
        secure_cookie: bool,
    ) -> None:
        self.handler = handler
        self.tasks = tasks
        self.runs = runs
        self.operator = operator
        self.push = push
        self.outbox = outbox
        self.verifier = verifier
        self.pause_pct = pause_pct
        self.secure_cookie = secure_cookie
        self.env = Environment(
            loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"])
        )
        self.env.filters["wire"] = lambda v: json.dumps(to_wire(v), indent=2)
        self.env.globals["age"] = views.age

    def _page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status)

    def _operator_only(self, request: Request) -> Response | None:
        person, operator = _person(request)
        if not operator:
            return self._page(
                "login.html", 403, error=f"the key of {person or 'this caller'} lacks the "
                "'operator' scope the dashboard needs",
            )  # fmt: skip
        return None

    # ---- logging in -----------------------------------------------------------------------

    async def login_page(self, request: Request) -> Response:
        expired = request.query_params.get("expired")
        return self._page("login.html", error="that key no longer works" if expired else None)

    async def login(self, request: Request) -> Response:
        body = await request.json()
        key = str(body.get("key") or "").strip() if isinstance(body, dict) else ""
        if self.verifier is not None:
            caller = await self.verifier.caller(key) if key else None
            if caller is None:
                return JSONResponse({"error": "this key is not valid"}, status_code=401)
            if "operator" not in caller.scopes:
                return JSONResponse(
                    {"error": "this key lacks the 'operator' scope the dashboard needs"},
                    status_code=403,
                )
        response = JSONResponse({"ok": True})
        response.set_cookie(
            UI_COOKIE, key, httponly=True, samesite="strict", path="/ui",
            secure=self.secure_cookie, max_age=12 * 3600,
        )  # fmt: skip
        return response

    async def logout(self, request: Request) -> Response:
        response = JSONResponse({"ok": True})
        response.delete_cookie(UI_COOKIE, path="/ui")
        return response

    # ---- pages ----------------------------------------------------------------------------

    async def _lines(self, request: Request) -> dict[str, Any]:
        state = request.query_params.get("state") or None
        owner = request.query_params.get("owner")
        lines = await self.operator.tasks(
            state=state if state in STATES else None, owner=owner or None, limit=200
        )
        return {
            "lines": lines,
            "state": state,
            "owner": owner,
            "states": STATES,
            "owners": await self.operator.owners(),
            "now": datetime.now(UTC),
        }

    async def task_list(self, request: Request) -> Response:
        return self._operator_only(request) or self._page(
            "tasks.html", **await self._lines(request)
        )

    async def task_list_body(self, request: Request) -> Response:
        return self._operator_only(request) or self._page(
            "_tasks.html", **await self._lines(request)
        )

    async def _task(self, task_id: str) -> dict[str, Any] | None:
        row = await self.tasks.get_task(task_id, None)
        if row is None:
            return None
        view = await self.runs.view(task_id)
        transitions = await self.runs.transitions(task_id)
        now = datetime.now(UTC)
        progress = progress_document(
            task_id, view.goal, view.items, [transition_line(t) for t in transitions]
        )
        diff = await self.tasks.task_file(task_id, row.owner, "output", "diff")
        configs = await self.push.configs(task_id, row.owner, None)
        request = (row.status_data or {}).get("approval_request")
        tree = await self.operator.run_tree(task_id)
        return {
            "tree": tree if len(tree) > 1 else [],
            "row": row,
            "view": view,
            "progress": progress,
            "marks": views.timeline(transitions),
            "bands": views.bands(transitions, now),
            "ticks": views.ticks(transitions, now),
            "gauges": views.gauges(row.metadata.get("budget"), self.pause_pct),
            "facts": views.facts(row.metadata, now),
            "configs": configs,
            "diff": diff.body.decode(errors="replace") if diff is not None else None,
            "request": request,
            "now": now,
        }

    async def task_page(self, request: Request) -> Response:
        denied = self._operator_only(request)
        if denied is not None:
            return denied
        found = await self._task(request.path_params["task_id"])
        if found is None:
            return self._page("login.html", 404, error="no such task")
        return self._page("task.html", **found)

    async def task_body(self, request: Request) -> Response:
        denied = self._operator_only(request)
        if denied is not None:
            return denied
        found = await self._task(request.path_params["task_id"])
        if found is None:
            return HTMLResponse("no such task", status_code=404)
        return self._page("_task.html", **found)

    async def live(self, request: Request) -> Response:
        """Server-sent events: `changed` whenever the task may have new rows."""
        denied = self._operator_only(request)
        if denied is not None:
            return denied
        task_id = request.path_params["task_id"]
        notifier = self.handler.notifier

        async def events() -> AsyncIterator[bytes]:
            async with notifier.watch(task_id) as wake:
                yield b"event: hello\ndata: {}\n\n"
                while True:
                    wake.clear()
                    try:
                        await asyncio.wait_for(wake.wait(), LIVE_POLL_S)
                    except TimeoutError:
                        yield b": still here\n\n"
                        continue
                    yield b"event: changed\ndata: {}\n\n"

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    # ---- actions: as an A2A caller would, for the owner -------------------------------------

    async def _context(self, request: Request, task_id: str) -> tuple[ServerCallContext, str]:
        row = await self.tasks.get_task(task_id, None)
        if row is None:
            raise LookupError(task_id)
        person, _ = _person(request)
        context = ServerCallContext(
            user=_Acting(row.owner),
            state={
                "auth": AuthCredentials(list(SCOPES)),
                "headers": {},
                "decided_by": person or "operator",
            },
        )
        return context, row.owner

    async def act(self, request: Request) -> Response:
        denied = self._operator_only(request)
        if denied is not None:
            return JSONResponse({"error": "the dashboard needs the 'operator' scope"}, 403)
        task_id, action = request.path_params["task_id"], request.path_params["action"]
        body = await request.json() if await request.body() else {}
        try:
            context, _ = await self._context(request, task_id)
            if action == "decide":
                approval = {
                    "id": body.get("request_id"),
                    "decision": body.get("decision"),
                    **({"note": body["note"]} if body.get("note") else {}),
                }
                task = await self.handler.on_message_send(
                    _send(_message(task_id, {"approval": approval})), context
                )
                return JSONResponse({"ok": True, "task": getattr(task, "id", task_id)})
            if action == "cancel":
                await self.handler.on_cancel_task(CancelTaskRequest(id=task_id), context)
                return JSONResponse({"ok": True})
            if action == "continue":
                message = _message("", {"continue": True})
                message.reference_task_ids.append(task_id)
                made = await self.handler.on_message_send(_send(message), context)
                return JSONResponse({"ok": True, "task": getattr(made, "id", None)})
            if action == "retry-push":
                retried = await self.outbox.retry(task_id, body.get("config_id"))
                return JSONResponse({"ok": True, "retried": retried})
        except LookupError:
            return JSONResponse({"error": f"no task {task_id}"}, status_code=404)
        except A2AError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except StoreError as exc:
            return JSONResponse({"error": str(exc)}, status_code=503)
        return JSONResponse({"error": f"no action {action!r}"}, status_code=404)

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/ui", self.task_list, methods=["GET"]),
            Route("/ui/login", self.login_page, methods=["GET"]),
            Route("/ui/login", self.login, methods=["POST"]),
            Route("/ui/logout", self.logout, methods=["POST"]),
            Route("/ui/tasks-body", self.task_list_body, methods=["GET"]),
            Route("/ui/tasks/{task_id}", self.task_page, methods=["GET"]),
            Route("/ui/tasks/{task_id}/body", self.task_body, methods=["GET"]),
            Route("/ui/tasks/{task_id}/live", self.live, methods=["GET"]),
            Route("/ui/tasks/{task_id}/{action}", self.act, methods=["POST"]),
        ]


def _message(task_id: str, payload: dict[str, Any]) -> Message:
    value = Value()
    value.struct_value.update(payload)
    return Message(
        message_id=f"ui-{uuid.uuid4()}",
        role=Role.ROLE_USER,
        task_id=task_id,
        parts=[Part(data=value, media_type="application/json")],
    )


def _send(message: Message) -> SendMessageRequest:
    return SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=True)
    )
