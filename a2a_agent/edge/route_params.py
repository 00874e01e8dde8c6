"""Path parameters and query values with a control character, refused before a route reads them.

A task id, a file name or an owner filter holding NUL (`%00` in the address) names nothing
stored here, and PostgreSQL refuses a text with NUL outright: the route would fail with the
driver's error. As the A2A handler refuses such an id (`push_configs.printable`), the routes
of our own (the dashboard, the task files) are wrapped by `printable_params`, which answers
400 with a sentence naming the parameter, in the form the route answers its other errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response

Endpoint = Callable[[Request], Awaitable[Response]]
# How a route refuses: the request and the sentence that says why; the status is 400.
Refuse = Callable[[Request, str], Response]

MAX_NAME_SHOWN = 40  # a query parameter's name longer than this is not quoted back
# What each path parameter is, in words.
NAMES = {"task_id": "task id", "name": "file name", "action": "action"}


def control_character(value: str) -> bool:
    return any(ord(c) < 32 or c == "\x7f" for c in value)


def unprintable(request: Request) -> str | None:
    """The sentence refusing `request` if a path parameter or a query value holds a control
    character (NUL and the like), else None."""
    for key, value in request.path_params.items():
        if isinstance(value, str) and control_character(value):
            what = NAMES.get(key, key.replace("_", " "))
            return (
                f"the {what} in the address contains a control character (such as %00, NUL), "
                f"which no {what} here has; check the link"
            )
    for key, value in request.query_params.multi_items():
        if control_character(value):
            unquoted = control_character(key) or len(key) > MAX_NAME_SHOWN
            what = "a query parameter" if unquoted else f"the query's {key!r}"
            return (
                f"{what} contains a control character (such as %00, NUL), which no value "
                "it takes has; remove it"
            )
    return None


def printable_params(endpoint: Endpoint, refuse: Refuse) -> Endpoint:
    """`endpoint`, refusing (400, by `refuse`) a request `unprintable` finds fault with."""

    async def checked(request: Request) -> Response:
        said = unprintable(request)
        if said is not None:
            return refuse(request, said)
        return await endpoint(request)

    checked.__name__ = getattr(endpoint, "__name__", "endpoint")
    return checked
