"""Whole numbers stay whole through protobuf's JSON.

A `google.protobuf.Value` holds every number as a double, and protobuf's JSON printer
(`json_format`) writes a double as a float: a plan's `maxAttempts: 2` read from a DataPart
became 2.0 in what we stored, and every count in a task's metadata and artifacts (`attempts`,
`itemsTotal`, `generation`) went back to callers as `2.0`. That printer is where every such
number passes: the SDK's answers on both bindings and versions, stream events and push bodies
(all `MessageToDict`), and our reads of DataParts and metadata. So it is taught here, once per
process, to write a double holding a whole number as an integer, as protobuf's Go and C++
printers do. JSON has one number type, so nothing a caller reads changes but the `.0`; a
fractional number stays as it was, and so does one beyond 2**53, where a double stops
counting every integer.

It replaces one method of `json_format._Printer`, protobuf's private printer class; a protobuf
that no longer has it fails at import, here, rather than silently printing floats
(`tests/test_whole_numbers.py`).
"""

from __future__ import annotations

from typing import Any

from google.protobuf import json_format
from google.protobuf.struct_pb2 import Value

EXACT = 2**53  # the largest magnitude below which a double holds every integer
_printer: Any = json_format._Printer  # private: see above
_value_to_json = _printer._ValueMessageToJsonObject  # fails at import if protobuf moved it


def _whole_value_to_json(self: Any, message: Value) -> Any:
    if message.WhichOneof("kind") == "number_value":
        number = message.number_value
        if number.is_integer() and abs(number) <= EXACT:
            return int(number)
    return _value_to_json(self, message)


def keep_whole_numbers() -> None:
    """Have protobuf's JSON printer write whole numbers as integers (idempotent)."""
    _printer._ValueMessageToJsonObject = _whole_value_to_json
