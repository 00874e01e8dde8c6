"""A tool's refusals in words, for the person or the model that called it.

The `mcp` SDK checks a tool's arguments with pydantic and hands the caller pydantic's report
("1 validation error for get_taskArguments", the input echoed, a link to errors.pydantic.dev),
and starts every refusal with `Error executing tool <name>: `. The door's tools are
`PlainTool`s: an argument refused says which one, what it takes and what came instead, an
argument the tool does not take is refused by name (pydantic would drop it without a word, so
a misspelt `bugdet` ran the task with no budget), and every refusal starts with the tool's
name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from persistence.records import JSON

# What a pydantic error type says was expected, in JSON's terms.
EXPECTED = {
    "string_type": "a string",
    "dict_type": "an object",
    "list_type": "a list",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
}
SHOWN_CHARS = 40  # of a string the caller sent in place of another type


class PlainTool(Tool):
    """A tool whose refusals are said plainly (the module's docstring)."""

    async def run(
        self, arguments: dict[str, Any], context: Context[Any, Any], convert_result: bool = False
    ) -> Any:
        unknown = unknown_arguments(arguments, list(self.parameters.get("properties") or {}))
        if unknown:
            raise ToolError(f"{self.name}: {unknown}")
        try:
            return await super().run(arguments, context, convert_result)
        except UnexpectedToolError:
            raise  # a crash: the SDK says only that it failed, and logs why
        except ToolError as exc:
            # The SDK wraps what it refused: the arguments' ValidationError, or the ToolError
            # the tool raised. The cause is kept, so the SDK's log still names the fields.
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"{self.name}: {refused(cause, self.parameters)}") from cause
            if isinstance(cause, ToolError):
                raise ToolError(f"{self.name}: {cause}") from cause
            raise


def closed(parameters: JSON) -> JSON:
    """A tool's input schema that says what `PlainTool.run` enforces: no other argument."""
    return {**parameters, "additionalProperties": False}


def unknown_arguments(arguments: dict[str, Any], known: Sequence[str]) -> str | None:
    """The arguments not in `known`, in words with the ones it takes; None if none."""
    unknown = [name for name in arguments if name not in known]
    if not unknown:
        return None
    named = ", ".join(f"`{name}`" for name in unknown)
    taken = ", ".join(f"`{name}`" for name in known) or "no arguments"
    what = "is not an argument" if len(unknown) == 1 else "are not arguments"
    return f"{named} {what} of this tool; it takes {taken}"


def refused(error: ValidationError, parameters: JSON) -> str:
    """Each argument `error` refused, in words: `task_id` is required (what it is), `note`
    must be a string; got 5."""
    properties = parameters.get("properties") or {}
    said: list[str] = []
    for problem in error.errors():
        path = _path(problem)
        if problem["type"] == "missing":
            wanted = properties.get(path, {}).get("description")
            text = f"`{path}` is required" + (f" ({wanted})" if wanted else "")
        else:
            expected = EXPECTED.get(problem["type"])
            got = _shown(problem.get("input"))
            text = (
                f"`{path}` must be {expected}; got {got}" if expected else f"`{path}` is not valid"
            )
        if text not in said:  # a union reports each of its members' refusals
            said.append(text)
    return "; ".join(said) or "the arguments are not valid"


def _path(problem: ErrorDetails) -> str:
    path = ""
    for part in problem["loc"]:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "arguments"


def _shown(value: object) -> str:
    """`value` as the caller sent it, in JSON's words."""
    if isinstance(value, str):
        short = value if len(value) <= SHOWN_CHARS else value[:SHOWN_CHARS] + "..."
        return f"the string {json.dumps(short)}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return json.dumps(value)  # a number, true, false or null: short, and said as JSON says it
