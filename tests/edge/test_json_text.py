"""Lone UTF-16 surrogate escapes found in a body before it is parsed (`edge/json_text.py`):
a half without its other half is named; a whole pair, or text that only looks like an escape
(its backslash escaped), is not."""

from __future__ import annotations

import json

import pytest

from a2a_agent.edge.json_text import lone_surrogate

CASES: list[tuple[str, str, str | None]] = [
    ("a first half alone", '{"a": "\\ud800"}', "\\ud800"),
    ("a second half alone", '{"a": "x\\uDC00"}', "\\uDC00"),
    ("a whole pair", '{"a": "\\ud83d\\ude00"}', None),
    ("a pair, then a first half", '{"a": "\\ud83d\\ude00\\ud83d"}', "\\ud83d"),
    ("two first halves", '{"a": "\\ud83d\\ud83d\\ude00"}', "\\ud83d"),
    ("an escaped backslash, then text", '{"a": "\\\\ud800"}', None),
    ("an escaped backslash, then an escape", '{"a": "\\\\\\ud800"}', "\\ud800"),
    ("a key", '{"\\udfff": 1}', "\\udfff"),
    ("other escapes", '{"a": "\\u00e9\\u4e2d\\n"}', None),
]


@pytest.mark.parametrize(("case", "body", "found"), CASES, ids=[c[0] for c in CASES])
def test_a_lone_half_is_found_and_a_whole_pair_is_not(
    case: str, body: str, found: str | None
) -> None:
    assert lone_surrogate(body.encode()) == found
    # Each case is JSON Python's parser takes; the found ones hold text UTF-8 cannot encode.
    text = json.dumps(json.loads(body), ensure_ascii=False)
    encodes = True
    try:
        text.encode()
    except UnicodeEncodeError:
        encodes = False
    assert encodes == (found is None), case
