"""An A2A 1.0 JSON-RPC call's params, checked against the protobuf message the SDK parses
them into, before it does, and what is wrong said in a sentence that names each field.

The SDK parses 1.0 params with protobuf's `ParseDict` (unknown fields ignored). A value of
the wrong type gets -32602 with "Invalid params" and protobuf's own text in `data`, and an
ERROR with a traceback in our log for each such call; an enum value it does not know (a
message's `role: "ROBOT"`) is silently taken as the field's zero, so the call goes on without
it. Here each field the call gives is compared with its descriptor: a wrong type or an
unknown enum value is refused as -32602 naming the field and what it takes. What this does
not know it leaves to the SDK (a field it does not know is ignored there as here).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, cast

import a2a.server.routes  # noqa: F401  (the dispatcher's module imports this package first)
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from google.protobuf.descriptor import Descriptor, EnumDescriptor, FieldDescriptor

from a2a_agent.edge.params_v03 import invalid_call, shown

# The message each method's params become in the SDK: the same map, so the same check.
MESSAGES: dict[str, Descriptor] = {
    method: cast(Any, model).DESCRIPTOR
    for method, model in JsonRpcDispatcher.METHOD_TO_MODEL.items()
}
INTEGERS = frozenset(
    {
        FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT32,
        FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_FIXED64,
        FieldDescriptor.TYPE_SFIXED32, FieldDescriptor.TYPE_SFIXED64,
    }
)  # fmt: skip
FLOATS = frozenset({FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT})
# Well-known types by the JSON they take (protobuf's JSON mapping); `Value` takes anything.
WELL_KNOWN: dict[str, tuple[type, ...]] = {
    "google.protobuf.Struct": (dict,),
    "google.protobuf.ListValue": (list,),
    "google.protobuf.Timestamp": (str,),
    "google.protobuf.Duration": (str,),
    "google.protobuf.FieldMask": (str,),
    "google.protobuf.Any": (dict,),
}
WRAPPERS = "google.protobuf."  # Int32Value and the like: their scalar, checked as such
ANYTHING = "google.protobuf.Value"


def params_problem(method: str, call: dict[str, Any]) -> str | None:
    """What is wrong with the params of `call` of the 1.0 `method`, as a sentence, or None
    when nothing this check knows is wrong with them."""
    message = MESSAGES.get(method)
    if message is None:
        return None
    params = call.get("params", {})
    if params is None:
        return None  # the SDK takes it as no params
    if not isinstance(params, dict):
        said = [f"params must be an object (got {shown(params)})"]
    else:
        said = list(dict.fromkeys(_message_problems(message, params, "params")))
    return invalid_call(method, said) if said else None


@functools.cache
def _fields(message: Descriptor) -> dict[str, FieldDescriptor]:
    """A message's fields by either name a JSON object may give them (made once each)."""
    return {**message.fields_by_name, **message.fields_by_camelcase_name}


def _message_problems(message: Descriptor, value: dict[str, Any], where: str) -> Iterator[str]:
    by_name = _fields(message)
    for key, given in value.items():
        field = by_name.get(key)
        if field is None or given is None:
            continue  # unknown fields are ignored; null is the field's default
        yield from _field_problems(field, given, f"{where}.{key}")


def _field_problems(field: FieldDescriptor, given: Any, where: str) -> Iterator[str]:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        if not isinstance(given, dict):
            yield f"{where} must be an object (got {shown(given)})"
            return
        value_field = entry.fields_by_name["value"]
        for key, item in given.items():
            if item is not None:
                yield from _value_problems(value_field, item, f"{where}.{key}")
        return
    if field.is_repeated:
        if not isinstance(given, list):
            yield f"{where} must be a list (got {shown(given)})"
            return
        for n, item in enumerate(given):
            yield from _value_problems(field, item, f"{where}[{n}]")
        return
    yield from _value_problems(field, given, where)


def _value_problems(field: FieldDescriptor, given: Any, where: str) -> Iterator[str]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_MESSAGE:
        yield from _message_value_problems(field.message_type, given, where)
    elif kind == FieldDescriptor.TYPE_ENUM:
        yield from _enum_problems(field.enum_type, given, where)
    elif kind in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        if not isinstance(given, str):
            yield f"{where} must be a string (got {shown(given)})"
    elif kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(given, bool):
            yield f"{where} must be true or false (got {shown(given)})"
    elif kind in INTEGERS:
        if not _integer(given):
            yield f"{where} must be a whole number (got {shown(given)})"
    elif kind in FLOATS and not _number(given):
        yield f"{where} must be a number (got {shown(given)})"


def _message_value_problems(message: Descriptor, given: Any, where: str) -> Iterator[str]:
    name = message.full_name
    if name == ANYTHING:
        return
    if name in WELL_KNOWN:
        if not isinstance(given, WELL_KNOWN[name]):
            what = "an object" if WELL_KNOWN[name] == (dict,) else "a list"
            what = "a string" if WELL_KNOWN[name] == (str,) else what
            yield f"{where} must be {what} (got {shown(given)})"
        return
    if name.startswith(WRAPPERS) and name.endswith("Value"):
        yield from _value_problems(message.fields_by_name["value"], given, where)
        return
    if not isinstance(given, dict):
        yield f"{where} must be an object (got {shown(given)})"
        return
    yield from _message_problems(message, given, where)


def _enum_problems(enum: EnumDescriptor, given: Any, where: str) -> Iterator[str]:
    if isinstance(given, str) and given in enum.values_by_name:
        return
    if isinstance(given, int) and not isinstance(given, bool) and given in enum.values_by_number:
        return
    named = [v.name for v in enum.values if v.number != 0]
    choices = ", ".join(named[:-1]) + f" or {named[-1]}" if len(named) > 1 else "".join(named)
    yield f"{where} must be {choices} (got {shown(given)})"


def _integer(given: Any) -> bool:
    """A whole number as protobuf's JSON parser takes one: a number with no fraction, or a
    string `int()` reads, without spaces."""
    if isinstance(given, bool):
        return False
    if isinstance(given, int):
        return True
    if isinstance(given, float):
        return given.is_integer()
    if isinstance(given, str) and " " not in given:
        try:
            int(given)
        except ValueError:
            return False
        return True
    return False


def _number(given: Any) -> bool:
    if isinstance(given, bool):
        return False
    if isinstance(given, int | float):
        return True
    if isinstance(given, str):
        try:
            float(given)
        except ValueError:
            return False
        return True
    return False
