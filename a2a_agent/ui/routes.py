"""The dashboard at /ui: server-rendered pages an operator watches and steers runs from.

A person logs in with an API key that has the `operator` scope (the key becomes an HttpOnly,
SameSite=Strict cookie; `RequireKey` checks it on every /ui request as it checks a bearer
key). The pages read the rows (any owner's tasks); every action goes through the same
handler an A2A caller's request does (an approval is a reply, a cancel is CancelTask, a
continuation is a new message), acting for the task's owner and recorded with the person's
principal (`actions.py`). A task page follows its run live: an SSE stream says `changed`
when the task's NOTIFY wakes it, or when a look at the task's version (every few seconds)
finds a change it was not notified of, and the page fetches its body again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Route

from a2a_agent.edge.auth import UI_COOKIE, KeyVerifier
from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.route_params import Endpoint, control_character, printable_params
from a2a_agent.harness.kernel.render import progress_document, transition_line
from a2a_agent.ui import views
from a2a_agent.ui.actions import Actions, json_object, person_of, refused
from a2a_agent.wire import to_wire
from persistence.errors import StoreError
from persistence.operator import OperatorStore
from persistence.push import PushConfigStore, PushOutbox
from persistence.runs import RunStore
from persistence.tasks import TaskStore

TEMPLATES = Path(__file__).parent / "templates"
STATES = ("submitted", "working", "input_required", "completed", "failed", "canceled", "rejected")
LIVE_KEEPALIVE_S = 15.0  # an SSE comment this often keeps proxies from closing the stream
# How often a live stream looks at the task's version itself: a NOTIFY missed (the listener
# reconnecting) would otherwise leave the page stale until the next one.
LIVE_CHECK_S = 2.0


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
        self.actions = Actions(handler=handler, operator=operator, outbox=outbox)

    def _page(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self.env.get_template(name).render(**context), status_code=status)

    def _operator_only(self, request: Request) -> Response | None:
        person, operator = person_of(request)
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
        body = await json_object(request)
        if isinstance(body, Response):
            return body
        key = body.get("key") or ""
        if not isinstance(key, str):
            return refused('send the key as a text: {"key": "a2a_..."}')
        key = key.strip()
        if control_character(key):
            return refused("the key contains a control character (such as NUL), which no key "
                           "has; paste the key again")  # fmt: skip
        if self.verifier is not None:
            try:
                caller = await self.verifier.caller(key) if key else None
            except StoreError:
                # The key cannot be looked up: say so, rather than that the key is wrong.
                return JSONResponse(
                    {"error": "the database is unavailable, so the key cannot be checked; "
                              "try again shortly"},
                    status_code=503,
                )  # fmt: skip
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
        # The version first: a change after it makes the page's stream say `changed`.
        version = await self.operator.version(task_id)
        row = await self.operator.task(task_id)
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
            "notes": await self.operator.notes(task_id),
            "version": version,
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
        """Server-sent events: `changed` whenever the task may have new rows. `?since=` is
        the version the page was made from (a change before the stream opened counts)."""
        denied = self._operator_only(request)
        if denied is not None:
            return denied
        task_id = request.path_params["task_id"]
        since = request.query_params.get("since")
        notifier = self.handler.notifier
        try:
            first: str | None = await self.operator.version(task_id)
        except StoreError:
            first = None  # the database is away: the stream looks again at its ticks
        if first == "":
            # A stream of a task that is not there would say nothing until the page is closed.
            return PlainTextResponse(f"no such task: {task_id}", status_code=404)

        async def version(seen: str) -> str:
            try:
                return await self.operator.version(task_id)
            except StoreError:
                return seen  # the database is away: look again at the next tick

        async def events() -> AsyncIterator[bytes]:
            async with notifier.watch(task_id) as wake:
                seen = first if first is not None else await version(since or "")
                yield b"event: hello\ndata: {}\n\n"
                if since is not None and seen != since:
                    yield b"event: changed\ndata: {}\n\n"
                quiet = 0.0
                while True:
                    wake.clear()
                    try:
                        await asyncio.wait_for(wake.wait(), LIVE_CHECK_S)
                        notified = True
                    except TimeoutError:
                        notified = False
                    now = await version(seen)
                    if notified or now != seen:
                        seen, quiet = now, 0.0
                        yield b"event: changed\ndata: {}\n\n"
                        continue
                    quiet += LIVE_CHECK_S
                    if quiet >= LIVE_KEEPALIVE_S:
                        quiet = 0.0
                        yield b": still here\n\n"

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    def routes(self) -> list[BaseRoute]:
        """Every route refuses a control character (NUL) in its path or query in the form it
        answers other errors (`route_params`): a page, a fragment's text, or JSON."""

        def page(endpoint: Endpoint) -> Endpoint:
            return printable_params(
                endpoint, lambda request, said: self._page("login.html", 400, error=said)
            )

        def fragment(endpoint: Endpoint) -> Endpoint:
            # What the page's script fetches (its body, its live stream), which answers its
            # own errors in plain text: the sentence may quote the query, which no page
            # should run, and a login page's form is no answer for a script.
            return printable_params(endpoint, lambda request, said: PlainTextResponse(said, 400))

        def data(endpoint: Endpoint) -> Endpoint:
            return printable_params(endpoint, lambda request, said: refused(said))

        return [
            Route("/ui", page(self.task_list), methods=["GET"]),
            Route("/ui/login", page(self.login_page), methods=["GET"]),
            Route("/ui/login", data(self.login), methods=["POST"]),
            Route("/ui/logout", data(self.logout), methods=["POST"]),
            Route("/ui/tasks-body", fragment(self.task_list_body), methods=["GET"]),
            Route("/ui/tasks/{task_id}", page(self.task_page), methods=["GET"]),
            Route("/ui/tasks/{task_id}/body", fragment(self.task_body), methods=["GET"]),
            Route("/ui/tasks/{task_id}/live", fragment(self.live), methods=["GET"]),
            Route("/ui/tasks/{task_id}/{action}", data(self.actions.act), methods=["POST"]),
        ]
