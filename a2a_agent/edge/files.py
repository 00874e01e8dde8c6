"""The task's files over HTTP, for its owner: a run's results (`/outputs/<task>/<name>`: the
diff, the bundle) and the files its first message carried (`/inputs/<task>/<n>`). Behind the
same key check as every other route; a file of another owner's task does not exist, and an id
or a name with a control character (NUL) is refused before it is looked up."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from a2a_agent.edge.route_params import printable_params
from persistence.errors import StoreUnavailable
from persistence.tasks import TaskStore


def _caller(request: Request) -> tuple[str, bool]:
    """(owner, may read) of the request's key, as RequireKey set it."""
    scopes = set(getattr(request.scope.get("auth"), "scopes", ()) or ())
    user = request.scope.get("user")
    owner = user.display_name if user is not None and user.is_authenticated else ""
    return owner, "read" in scopes


def file_routes(store: TaskStore) -> list[Route]:
    async def serve(request: Request, kind: str) -> Response:
        owner, may_read = _caller(request)
        if not may_read:
            return JSONResponse(
                {"error": "this API key may not read tasks: it lacks the 'read' scope"},
                status_code=403,
            )
        task_id = request.path_params["task_id"]
        name = request.path_params["name"]
        try:
            found = await store.task_file(task_id, owner, kind, name)
        except StoreUnavailable:
            return JSONResponse({"error": "the database is unavailable; try again"}, 503)
        if found is None:
            return JSONResponse(
                {"error": f"task {task_id} has no {kind} {name!r} (or the task is not yours)"},
                status_code=404,
            )
        filename = (found.filename or name).replace('"', "")
        return Response(
            found.body,
            media_type=found.media_type,
            headers={
                "Content-Disposition": f'attachment; filename="{filename}"',
                "Digest": f"sha-256={found.sha256}",
                "Cache-Control": "private, no-store",
            },
        )

    async def outputs(request: Request) -> Response:
        return await serve(request, "output")

    async def inputs(request: Request) -> Response:
        return await serve(request, "input")

    def refuse(request: Request, said: str) -> Response:
        return JSONResponse({"error": said}, status_code=400)

    return [
        Route("/outputs/{task_id}/{name}", printable_params(outputs, refuse), methods=["GET"]),
        Route("/inputs/{task_id}/{name}", printable_params(inputs, refuse), methods=["GET"]),
    ]
