"""Named queries loaded from the .sql files beside this module."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from typing import LiteralString

from persistence.errors import StoreError

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """Split a file of `-- name: x` blocks into {x: sql}."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise StoreError(f"query {name!r} is defined twice")
        queries[name] = body.strip().rstrip(";")
    return queries


@cache
def queries() -> dict[str, str]:
    """Every named query of every file in persistence/queries, by name."""
    found: dict[str, str] = {}
    for entry in sorted(
        resources.files("persistence").joinpath("queries").iterdir(), key=lambda e: e.name
    ):
        if entry.name.endswith(".sql"):
            for name, sql in parse_queries(entry.read_text()).items():
                if name in found:
                    raise StoreError(f"query {name!r} is defined in two files")
                found[name] = sql
    return found


def q(name: str) -> LiteralString:
    """The query named `name`. Query text comes only from this package's files, never from input."""
    try:
        return queries()[name]
    except KeyError:
        raise StoreError(f"no query named {name!r}") from None
