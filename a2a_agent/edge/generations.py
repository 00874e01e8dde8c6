"""A task's generation as callers name it: the number of its last event (`tasks.event_seq`),
carried on GetTask's task and every event (`metadata.generation`). A long poll waits past one
(edge/long_poll.py); a follow-up message names one in `ifGenerationMatch` (the request's or
the message's metadata) to be applied only to the task as its sender last saw it. The check
is made under the task's row lock, in the same statement as the write (`add_note`,
`answer_pause` in persistence/functions.sql)."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import SendMessageRequest
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

IF_MATCH = "ifGenerationMatch"


class NotAGeneration(ValueError):
    """A value given as a generation or a wait that is not a whole number of 0 or more."""


def whole_number(value: Any, name: str) -> int | None:
    """`value` as a count (a digit string, or a whole float that passed through a protobuf
    Struct); None if absent; NotAGeneration, saying what is wrong, otherwise."""
    if value is None:
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NotAGeneration(f"{name} must be a whole number of 0 or more, not {value!r}")
    return value


def if_generation(params: SendMessageRequest) -> int | None:
    """The generation a follow-up is conditioned on, from the request's metadata or the
    message's (InvalidParams if it is not a generation)."""
    for holder in (params.metadata, params.message.metadata):
        if IF_MATCH in holder:
            value = MessageToDict(holder)[IF_MATCH]
            try:
                return whole_number(value, IF_MATCH)
            except NotAGeneration as exc:
                raise InvalidParamsError(str(exc)) from exc
    return None


def stale(task_id: str, expected: int | None, now: int) -> UnsupportedOperationError:
    """The refusal of a follow-up whose task has moved past the generation it named."""
    return UnsupportedOperationError(
        f"task {task_id} is at generation {now}, not {expected} ({IF_MATCH}): it has moved on "
        "since you read it; read it again (GetTask) and send what still applies; nothing "
        "was applied"
    )
