"""The reads an orchestrator repeats (GetTask at both versions, ListTasks), on both bindings,
without the SDK's per-request dispatch, for the plain case: one read path.

For a well-formed read of the caller's own tasks this answers as the SDK's route would:
GetTask (1.0: JSON-RPC `GetTask`, `GET /tasks/{id}`; 0.3: JSON-RPC `tasks/get`,
`GET /v1/tasks/{id}`, with the SDK's own 0.3 conversions), and ListTasks (1.0, both
bindings). Each task is converted to its JSON once per stored row and kept (the read cache
hands out one row object until the task changes), so a poll costs a cache look-up and a
few byte joins. Everything else, errors included, goes to the SDK's route unchanged, so
every error code and message is the SDK's own. tests/edge/test_fast_reads.py holds the two
to the same bytes (GetTask) and the same JSON (ListTasks: the SDK writes copies of the tasks,
and a copied protobuf Struct may list its keys in another order).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import parse_qs

from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as types_v03
from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from a2a.utils.errors import A2AError
from a2a.utils.proto_utils import parse_params
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from starlette.datastructures import QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_agent.edge.handler import AgentRequestHandler
from a2a_agent.edge.rest_versions import unknown_status
from a2a_agent.edge.rpc_calls import parsed_before
from a2a_agent.edge.task_view import json_bytes
from persistence.errors import StoreError

MAX_BODY = 4096  # a read is a few hundred bytes; anything larger goes the long way
MAX_KEPT = 10_000
GET_TASK_KEYS = frozenset({"id", "historyLength"})
# ListTasks' parameters the short path takes (statusTimestampAfter, a tenant: the long way).
LIST_KEYS = frozenset(
    {"pageSize", "pageToken", "contextId", "status", "historyLength", "includeArtifacts"}
)
RPC_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
V10 = b"1.0"
V03 = (None, b"0.3")  # a 0.3 client sends no version, or this one
A2A_JSON = A2A_JSON_MEDIA_TYPE.encode()
PLAIN_JSON = b"application/json"
TASKS_MARK = "\x00tasks\x00"  # where a page's tasks go (no task's JSON holds a NUL)
Kept = tuple[object, bytes]  # what the bytes were made from (a row, a Task) and the bytes


def _v03_history(task_id: str, history: int | None) -> int | None:
    """The history a 0.3 read asks for, as the SDK's conversion reads it (0: all of it)."""
    asked = types_v03.GetTaskRequest(
        id=0, params=types_v03.TaskQueryParams(id=task_id, history_length=history)
    )
    core = conversions.to_core_get_task_request(asked)
    return core.history_length if core.HasField("history_length") else None


def _v10(task: Task) -> bytes:
    """A task as the SDK's 1.0 routes write it (both bindings)."""
    return json_bytes(MessageToDict(task, preserving_proto_field_name=False))


def _v03_rpc(task: Task) -> bytes:
    """A task as the SDK's 0.3 JSON-RPC route dumps it (its pydantic 0.3 types)."""
    compat = conversions.to_compat_task(task)
    return json_bytes(compat.model_dump(mode="json", by_alias=True, exclude_none=True))


def _v03_rest(task: Task) -> bytes:
    """A task as the SDK's 0.3 REST route writes it (its 0.3 protobuf, as a dict)."""
    return json_bytes(MessageToDict(proto_utils.ToProto.task(conversions.to_compat_task(task))))


def _listed(task: Task, artifacts: bool) -> bytes:
    """A task inside a ListTasks answer, as the SDK serializes the page (every field shown;
    artifacts only when asked for)."""
    data = MessageToDict(
        task, preserving_proto_field_name=False, always_print_fields_with_no_presence=True
    )
    if not artifacts:
        data.pop("artifacts", None)
    return json_bytes(data)


TASK_FLAVORS: dict[str, Callable[[Task], bytes]] = {
    "1.0": _v10,
    "0.3-rpc": _v03_rpc,
    "0.3-rest": _v03_rest,
}


class FastReads:
    """ASGI middleware: answers plain reads (GetTask 1.0 and 0.3, ListTasks 1.0) on the
    JSON-RPC `path` and the HTTP+JSON routes; passes everything else on."""

    def __init__(self, app: ASGIApp, handler: AgentRequestHandler, path: str = "/") -> None:
        self.app = app
        self.handler = handler
        self.path = path
        self._kept: OrderedDict[tuple[str, int | None, str], Kept] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "GET":
            found = await self._rest_answer(scope)
            if found is None:
                await self.app(scope, receive, send)
            else:
                await respond_bytes(send, *found)
            return
        if scope["method"] != "POST" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        body, whole, extra = await read_small(receive)
        answer = await self._rpc_answer(scope, body) if whole else None
        if answer is None:
            await self.app(scope, replay(body, whole, extra, receive), send)
            return
        await respond_bytes(send, answer, PLAIN_JSON)

    # ---- HTTP+JSON ----------------------------------------------------------------------

    async def _rest_answer(self, scope: Scope) -> tuple[bytes, bytes] | None:
        """`GET /tasks/{id}` and `GET /tasks` at 1.0, `GET /v1/tasks/{id}` at 0.3, as the
        SDK's REST routes answer them; anything else (a tenant, other parameters, other
        versions) goes the long way."""
        path, version = scope["path"], _header(scope, b"a2a-version")
        if path == "/tasks" and version == V10:
            if unknown_status(QueryParams(scope["query_string"]).getlist("status")):
                return None  # refused on the SDK's route (rest_versions), tenants' too
            query = _query(scope, LIST_KEYS)
            if query is None:
                return None
            request = ListTasksRequest()
            try:
                parse_params(query, request)
            except (ParseError, ValueError, TypeError):
                return None
            page = await self._page(scope, request)
            return None if page is None else (page, A2A_JSON)
        for prefix, versions, flavor, media in (
            ("/tasks/", (V10,), "1.0", A2A_JSON),
            ("/v1/tasks/", V03, "0.3-rest", PLAIN_JSON),
        ):
            if path.startswith(prefix) and version in versions:
                task_id = path[len(prefix) :]
                if not task_id or "/" in task_id or ":" in task_id:
                    return None
                query = _query(scope, frozenset({"historyLength"}))
                values = query.getlist("historyLength") if query is not None else None
                if values is None or len(values) > 1 or (values and not values[0].isdigit()):
                    return None
                history = int(values[0]) if values else None
                task = await self._task_bytes(scope, task_id, history, flavor)
                return None if task is None else (task, media)
        return None

    # ---- JSON-RPC -----------------------------------------------------------------------

    async def _rpc_answer(self, scope: Scope, body: bytes) -> bytes | None:
        version = _header(scope, b"a2a-version")
        if version == V10 and b"GetTask" in body:
            method, flavor = "GetTask", "1.0"
        elif version in V03 and b"tasks/get" in body:
            method, flavor = "tasks/get", "0.3-rpc"
        elif version == V10 and b"ListTasks" in body:
            method, flavor = "ListTasks", "list"
        else:
            return None
        call = rpc_call(body, method, scope)
        if call is None:
            return None
        request_id, params = call
        if method == "ListTasks":
            # A status no state names never gets here: the door refused it (params_v10).
            if set(params) - LIST_KEYS:
                return None
            try:
                request = ParseDict(params, ListTasksRequest(), ignore_unknown_fields=True)
            except ParseError:
                return None
            result = await self._page(scope, request)
        else:
            if set(params) - GET_TASK_KEYS:
                return None
            task_id, history = params.get("id"), params.get("historyLength")
            if not isinstance(task_id, str) or not task_id:
                return None
            if history is not None and (
                isinstance(history, bool) or not isinstance(history, int) or history < 0
            ):
                return None
            result = await self._task_bytes(scope, task_id, history, flavor)
        if result is None:
            return None
        said_id = json_bytes(request_id)
        if flavor == "0.3-rpc":  # the 0.3 types' own field order
            return b'{"id":' + said_id + b',"jsonrpc":"2.0","result":' + result + b"}"
        return b'{"result":' + result + b',"id":' + said_id + b',"jsonrpc":"2.0"}'

    # ---- the reads ----------------------------------------------------------------------

    async def _task_bytes(
        self, scope: Scope, task_id: str, history: int | None, flavor: str
    ) -> bytes | None:
        owner = owner_reading(scope)
        if owner is None:
            return None  # the SDK's route refuses it, saying why
        try:
            row = await self.handler.store.get_task(task_id, owner)
        except StoreError:
            return None  # the SDK's route says what went wrong
        if row is None or row.state == "submitted":
            return None  # a task not yet taken says where it waits (the handler's GetTask)
        if flavor.startswith("0.3"):
            history = _v03_history(task_id, history)
        task = self.handler.task_of(row, history)
        return self._keep((task_id, history, flavor), row, partial(TASK_FLAVORS[flavor], task))

    async def _page(self, scope: Scope, request: ListTasksRequest) -> bytes | None:
        """ListTasks' result: the handler's page, each task's JSON kept per converted task."""
        owner = owner_reading(scope)
        if owner is None:
            return None
        try:
            page = await self.handler.list_page(request, owner)
        except (A2AError, StoreError):
            return None  # the SDK's route gives the error, with its code
        history = request.history_length if request.HasField("history_length") else None
        artifacts = request.include_artifacts
        flavor = "list+artifacts" if artifacts else "list"
        tasks = [
            self._keep((t.id, history, flavor), t, partial(_listed, t, artifacts))
            for t in page.tasks
        ]
        # The page as the SDK writes it, its tasks marked: where a field falls depends on
        # which are set (set fields first, by number; then the empty ones).
        shape = ListTasksResponse(
            tasks=[Task()] if page.tasks else [],
            next_page_token=page.next_page_token,
            page_size=page.page_size,
            total_size=page.total_size,
        )
        data = MessageToDict(
            shape, preserving_proto_field_name=False, always_print_fields_with_no_presence=True
        )
        data["tasks"] = TASKS_MARK
        head, found, tail = json_bytes(data).partition(json_bytes(TASKS_MARK))
        if not found:
            return None
        return head + b"[" + b",".join(tasks) + b"]" + tail

    def _keep(
        self, key: tuple[str, int | None, str], source: object, make: Callable[[], bytes]
    ) -> bytes:
        """The bytes made from `source` (a row, a converted task), made once per object."""
        hit = self._kept.get(key)
        if hit is not None and hit[0] is source:
            return hit[1]
        data = make()
        self._kept[key] = (source, data)
        self._kept.move_to_end(key)
        if len(self._kept) > MAX_KEPT:
            self._kept.popitem(last=False)
        return data


def rpc_call(body: bytes, method: str, scope: Scope) -> tuple[str | int, dict[str, Any]] | None:
    """A plain JSON-RPC call of `method`: its id and params, or None. The body as the door
    parsed it when it did (`rpc_calls.parsed_before`); the caller does not change it."""
    request: Any = parsed_before(scope, body)
    if request is None:
        try:
            request = json.loads(body)
        except ValueError:
            return None
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
        return None
    if request.get("method") != method or set(request) - RPC_KEYS:
        return None
    request_id, params = request.get("id"), request.get("params")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    if not isinstance(params, dict):
        return None
    return request_id, params


def _query(scope: Scope, allowed: frozenset[str]) -> QueryParams | None:
    """The query string's parameters, when each is one of `allowed` and given once."""
    raw = scope.get("query_string", b"").decode("latin-1")
    parsed = parse_qs(raw, keep_blank_values=True)
    if set(parsed) - allowed or any(len(v) != 1 for v in parsed.values()):
        return None
    return QueryParams(raw)


async def respond_bytes(send: Send, body: bytes, media_type: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-length", str(len(body)).encode()),
                (b"content-type", media_type),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def owner_reading(scope: Scope) -> str | None:
    """As the handler does: the caller's principal when its key may read, else None."""
    user, auth = scope.get("user"), scope.get("auth")
    if user is None or auth is None or "read" not in auth.scopes:
        return None
    return str(user.display_name) if user.is_authenticated else ""


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


async def read_small(receive: Receive, limit: int = MAX_BODY) -> tuple[bytes, bool, Message | None]:
    """The body read so far; whether it is whole (at most `limit` bytes, and complete); and
    a message that came instead of more body (a disconnect), to hand on."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False, message
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True, None
        if size > limit:
            return b"".join(chunks), False, None


def replay(body: bytes, whole: bool, extra: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the downstream app the body already read, then the rest."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": not whole}]
    if extra is not None:
        pending.append(extra)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
