"""The error root of the persistence package; psycopg errors are translated in `db.py`."""

from __future__ import annotations


class StoreError(Exception):
    """Root of every error the store raises. Messages are ours, never the driver's."""


class StoreUnavailable(StoreError):
    """The database could not be reached or the connection broke."""


class NotFound(StoreError):
    """The row asked for does not exist (or belongs to another owner)."""


class Conflict(StoreError):
    """The write would break a rule the database enforces (a duplicate, a stale state)."""


class InvalidData(StoreError):
    """The database refused a value (malformed, or larger than a column takes)."""


class SchemaOutdated(StoreError):
    """The database schema is older or newer than this code expects."""
