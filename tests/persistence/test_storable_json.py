"""What jsonb receives: a value as it is, unless a string or key in it holds a NUL, which
PostgreSQL's jsonb cannot hold; then each NUL becomes U+2400 (safe.py). Through a real
jsonb column, since that is what refuses a NUL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from persistence.safe import NUL_SYMBOL, jsonb, storable_json
from tests.support.db import connection

VALUES: list[Any] = [
    {"plain": "text", "n": [1, 2.5, None, True], "ünïcode": "✓"},
    {"out": "a\x00b", "nested": [{"deep": "\x00"}]},
    {"key\x00": 1},
    {"escaped": "\\u0000 is six characters here, not a NUL"},
]


@pytest.mark.parametrize("value", VALUES)
def test_jsonb_stores_each_value_with_its_nuls_made_visible(database_url: str, value: Any) -> None:
    stored = connection(database_url).execute("SELECT %s::jsonb", (jsonb(value),)).fetchone()
    assert stored is not None
    if "escaped" in value:
        expected = value  # its backslash is a backslash: nothing to replace
    else:
        expected = json.loads(json.dumps(value).replace("\\u0000", "\\u2400"))
    assert stored[0] == expected


def test_a_value_without_a_nul_is_written_once_as_it_is() -> None:
    value = VALUES[0]
    assert json.loads(storable_json(value)) == value
    made_visible = json.loads(storable_json(VALUES[1]))
    assert made_visible == {"out": f"a{NUL_SYMBOL}b", "nested": [{"deep": NUL_SYMBOL}]}


def test_a_key_that_is_not_a_string_is_spelled_alike_with_or_without_a_nul() -> None:
    assert json.loads(storable_json({2: "a", None: "b"})) == {"2": "a", "null": "b"}
    with_nul = json.loads(storable_json({2: "a\x00", None: "b"}))
    assert with_nul == {"2": f"a{NUL_SYMBOL}", "null": "b"}
