"""Values made storable: PostgreSQL text and jsonb cannot hold a NUL character.

Command output, file contents and model text may carry NUL bytes. They are stored with each
NUL replaced by U+2400 (the visible symbol for NUL), so a step never fails on its own output.
Input from callers is refused at the edge instead (see `a2a_agent.edge.intake`).
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import Jsonb

NUL = "\x00"
NUL_SYMBOL = "\u2400"


def safe_text(value: str) -> str:
    return value.replace(NUL, NUL_SYMBOL) if NUL in value else value


def safe_optional(value: str | None) -> str | None:
    return None if value is None else safe_text(value)


def safe_value(value: Any) -> Any:
    """`value` with every string in it (keys too) made storable."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, dict):
        # A key that is not a string is left for the JSON writer to spell, as it is when
        # the value holds no NUL (storable_json).
        return {safe_text(k) if isinstance(k, str) else k: safe_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [safe_value(v) for v in value]
    return value


def storable_json(value: Any) -> str:
    """`value` as JSON text PostgreSQL's jsonb takes. Most values hold no NUL, and JSON writes
    one as the six characters `\\u0000` (any other text holding them is an escaped backslash
    before them): only a value whose text holds those is walked and written again."""
    text = json.dumps(value, separators=(",", ":"))
    return json.dumps(safe_value(value), separators=(",", ":")) if "\\u0000" in text else text


def jsonb(value: Any) -> Jsonb:
    return Jsonb(value, dumps=storable_json)


def optional_jsonb(value: Any) -> Jsonb | None:
    return None if value is None else jsonb(value)
