"""Text JSON can write but no character is: a lone UTF-16 surrogate escape (`"\\ud800"`),
found in a request body before anything parses it.

JSON writes a character beyond the Basic Multilingual Plane as a pair of escapes, and its
parsers (Python's, so the SDK's) take one half alone as a "character" UTF-8 cannot encode:
protobuf's parser refuses it in its own words with a logged traceback, and where nothing
parses it first it reached the database driver, which cannot send it (a 500). Such a body is
refused here as invalid params, naming the escape.

Ordinary bodies pay for two byte searches: only a body holding `\\ud` or `\\uD` is scanned.
"""

from __future__ import annotations

import re

SURROGATE = re.compile(rb"\\u([dD][89abcdefABCDEF][0-9a-fA-F]{2})")
LOW = 0xDC00  # the first low (second) half; below it, high (first) halves


def _escaped(body: bytes, at: int) -> bool:
    """Whether the backslash at `at` is itself escaped (an odd run of backslashes before it):
    then `\\ud800` is six characters of text, not an escape."""
    run = 0
    while at - run - 1 >= 0 and body[at - run - 1] == 0x5C:
        run += 1
    return run % 2 == 1


def lone_surrogate(body: bytes) -> str | None:
    """The first surrogate escape in `body` without its other half (such as `\\ud800`), or
    None."""
    if b"\\ud" not in body and b"\\uD" not in body:
        return None
    paired_low = -1  # where the low half of the last whole pair starts
    for found in SURROGATE.finditer(body):
        if found.start() == paired_low or _escaped(body, found.start()):
            continue
        if int(found.group(1), 16) >= LOW:
            return found.group(0).decode()  # a second half with no first before it
        after = SURROGATE.match(body, found.end())
        if after is None or int(after.group(1), 16) < LOW:
            return found.group(0).decode()  # a first half with no second after it
        paired_low = after.start()
    return None


def lone_surrogate_message(escape: str) -> str:
    return (
        f"the request holds {escape}, half of a UTF-16 surrogate pair without its other half: "
        "it is no character and cannot be stored; send the text as UTF-8, or the pair whole"
    )
