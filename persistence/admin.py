"""Creating the service's database on a server we administer (the embedded default)."""

from __future__ import annotations

import psycopg
from psycopg import sql

from persistence.db import translated
from persistence.sql import q


def ensure_database(admin_uri: str, name: str) -> None:
    """Create database `name` unless it exists. (An identifier cannot be a query parameter;
    it is composed with psycopg's quoting, never pasted into text.)"""
    with translated("creating the database"), psycopg.connect(admin_uri, autocommit=True) as conn:
        if conn.execute(q("database_exists"), {"name": name}).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
