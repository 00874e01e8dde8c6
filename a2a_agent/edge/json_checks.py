"""Numbers JSON cannot carry, found in a request body before anything parses it.

Python's `json` (and so the SDK) takes `NaN`, `Infinity` and `-Infinity`, and reads a number
too large for a double (`1e999`, or an integer of 400 digits) as infinity or as an integer no
double holds. None of them survives the trip into a protobuf `Value` and back out: the caller
would get an internal error naming no field. `nonfinite(body)` names the first such number by
its path in the body, so the request can be refused as invalid params before the SDK reads it.

Ordinary bodies pay for one regular-expression scan: a suspicious token can only stand where a
JSON value starts (after `:`, `[` or `,`), never inside a string such as a base64 file. Only a
body with such a token is parsed, with hooks that keep no number's value.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

# The scan works on a copy with every digit made "0", "E" made "e" and "+" dropped, so a few
# searches (each at the speed of memchr) find every token that may be such a number: the
# constants Python's json takes, an exponent of three digits or more after a digit (1e309 is
# the smallest power of ten that overflows; "+" dropped, "1e+999" reads "0e000"), or 200
# digits in a row (a mantissa of fewer than 210 digits times 1e99 stays finite).
FOLD = bytes.maketrans(b"0123456789E", b"0000000000e")
TOKENS = (b"NaN", b"Infinity", b"0e000", b"0" * 200)
# Each place a token was found is looked at: it matters only where a JSON value starts (after
# ':', '[' or ',' and whitespace), never inside a string such as a base64 file. Past this
# many places, or a look-behind this long, the body is simply parsed.
MAX_PLACES = 64
LOOK_BEHIND = 512
WHITESPACE = b" \t\r\n"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_KEY_SHOWN = 60
MAX_LITERAL_SHOWN = 24


@dataclass(frozen=True)
class NonFinite:
    """A number JSON cannot carry: where it is in the body, and how it was written."""

    path: str
    literal: str

    @property
    def what(self) -> str:
        if self.literal.lstrip("-") in ("NaN", "Infinity"):
            return self.literal
        shown = self.literal
        if len(shown) > MAX_LITERAL_SHOWN:
            shown = shown[: MAX_LITERAL_SHOWN - 1] + "…"
        return f"{shown}, beyond the largest number a double holds"

    @property
    def message(self) -> str:
        return nonfinite_message(self.path, self.what)


class _Pairs(list[tuple[str, Any]]):
    """An object's members in order (duplicates kept), told apart from an array."""


class _Bad:
    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _number(text: str) -> _Bad | None:
    # float() of the text, never int(): no digit limit, and an overflow is simply inf.
    return _Bad(text) if math.isinf(float(text)) else None


def _key(key: str) -> str:
    if NAME.fullmatch(key) and len(key) <= MAX_KEY_SHOWN:
        return "." + key
    shown = key if len(key) <= MAX_KEY_SHOWN else key[: MAX_KEY_SHOWN - 1] + "…"
    return "[" + json.dumps(shown, ensure_ascii=False) + "]"


def _first(value: Any, path: str) -> NonFinite | None:
    if isinstance(value, _Bad):
        return NonFinite(path or "the request body", value.literal)
    if isinstance(value, _Pairs):
        for key, member in value:
            found = _first(member, path + _key(key) if path else _key(key).lstrip("."))
            if found is not None:
                return found
    elif isinstance(value, list):
        for n, member in enumerate(value):
            found = _first(member, f"{path}[{n}]")
            if found is not None:
                return found
    return None


def _value_starts(folded: bytes, end: int) -> bool:
    """Whether a JSON value may start where `folded[:end]` ends once the sign and digits of
    a number (and whitespace) are passed over."""
    start = max(0, end - LOOK_BEHIND)
    before = folded[start:end].rstrip(b"0.").rstrip(b"-").rstrip(WHITESPACE)
    if not before:
        return True  # the body's start, or a look-behind too long to tell: parse
    return before[-1:] in (b":", b",", b"[")


def _suspect(body: bytes) -> bool:
    """Whether `body` may hold a number JSON cannot carry (parse it to know)."""
    folded = body.translate(FOLD, b"+")
    places = 0
    for token in TOKENS:
        at = folded.find(token)
        while at >= 0:
            places += 1
            if places > MAX_PLACES or _value_starts(folded, at):
                return True
            at = folded.find(token, at + len(token))
    return False


def nonfinite(body: bytes) -> NonFinite | None:
    """The first number in `body` that JSON cannot carry (NaN, Infinity, -Infinity, or one
    that overflows a double), or None. A body that is not JSON gives None: the parser that
    reads it next reports that."""
    if not _suspect(body):
        return None
    try:
        tree = json.loads(
            body,
            object_pairs_hook=_Pairs,
            parse_constant=_Bad,
            parse_float=_number,
            parse_int=_number,
        )
    except (ValueError, RecursionError):
        return None
    return _first(tree, "")


def nonfinite_path(body: bytes) -> str | None:
    """The path of the first number in `body` JSON cannot carry (such as
    `params.message.parts[0].data.plan.items[0].timeoutS`), or None."""
    found = nonfinite(body)
    return None if found is None else found.path


def nonfinite_message(path: str, what: str = "NaN") -> str:
    """What an invalid-params refusal says of a number JSON cannot carry at `path`."""
    return f"{path} is not a number JSON can carry ({what}); send a finite number"
