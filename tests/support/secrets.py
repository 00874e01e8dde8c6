"""Secrets the suite hands the service: none may show up in any process's log."""

from __future__ import annotations

KNOWN_SECRETS: set[str] = set()


def secret(value: str) -> str:
    """Register `value` as a secret (the log check at the end of the session looks for it)."""
    KNOWN_SECRETS.add(value)
    return value
