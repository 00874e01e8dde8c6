"""What a caller may do: the scopes of its key, checked per method by the handler.

`read` (get, list, subscribe, push configs), `submit` (new tasks and cancels), `run` (plans
whose items carry `run` commands: commands of the caller's own, so not given by default),
`approve` (replies to a task's requests and notes to its work), `operator` (the dashboard
and the operator's CLI). Tasks belong to the caller's principal; the store's queries take
the owner, so another principal's task does not exist for a caller.
"""

from __future__ import annotations

from a2a.server.context import ServerCallContext
from a2a.utils.errors import InvalidRequestError

NEEDED_FOR = {
    "read": "read tasks",
    "submit": "submit or cancel tasks",
    "run": "submit plans with `run` commands",
    "approve": "answer a task's requests or send it notes",
    "operator": "use the operator's tools",
}


def scopes_of(context: ServerCallContext) -> frozenset[str]:
    auth = context.state.get("auth")
    return frozenset(getattr(auth, "scopes", ()) or ())


def owner(context: ServerCallContext, scope: str) -> str:
    """The caller's principal (the owner of its tasks), once it holds `scope`."""
    require(context, scope)
    user = context.user
    return user.user_name if user.is_authenticated else ""


def require(context: ServerCallContext, scope: str) -> None:
    if scope not in scopes_of(context):
        raise InvalidRequestError(
            f"this API key may not {NEEDED_FOR[scope]}: it lacks the {scope!r} scope; ask an "
            "operator for a key that has it (a2a-agent keys create --scope ...)"
        )
