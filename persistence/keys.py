"""API keys: a principal and its scopes per key, the secret kept only as a hash."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from persistence.db import Pool, read
from persistence.sql import q


@dataclass(frozen=True)
class StoredKey:
    id: str
    principal: str
    name: str
    scopes: tuple[str, ...]
    secret_hash: str = ""
    revoked: bool = False
    created_at: datetime | None = None
    revoked_at: datetime | None = None


class KeyStore(Protocol):
    async def key(self, key_id: str) -> StoredKey | None: ...
    async def create(self, key: StoredKey, *, first: bool = False) -> bool: ...
    async def keys(self) -> list[StoredKey]: ...
    async def revoke(self, key_id: str) -> bool: ...


def _key(row: dict[str, Any]) -> StoredKey:
    return StoredKey(
        id=row["id"],
        principal=row["principal"],
        name=row["name"],
        scopes=tuple(row["scopes"]),
        secret_hash=row.get("secret_hash", ""),
        revoked=bool(row.get("revoked", row.get("revoked_at") is not None)),
        created_at=row.get("created_at"),
        revoked_at=row.get("revoked_at"),
    )


class PostgresKeyStore:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def key(self, key_id: str) -> StoredKey | None:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("key_by_id"), {"id": key_id})
            row = await cur.fetchone()
        return _key(row) if row else None

    async def create(self, key: StoredKey, *, first: bool = False) -> bool:
        """Store `key`; with `first`, only if this database has no key yet (False if so)."""
        params = {
            "id": key.id,
            "principal": key.principal,
            "name": key.name,
            "scopes": list(key.scopes),
            "secret_hash": key.secret_hash,
        }
        async with read(self._pool) as conn:
            cur = await conn.execute(q("create_first_key" if first else "create_key"), params)
            return not first or await cur.fetchone() is not None

    async def keys(self) -> list[StoredKey]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("list_keys"), {})
            return [_key(r) for r in await cur.fetchall()]

    async def revoke(self, key_id: str) -> bool:
        async with read(self._pool) as conn:
            cur = await conn.execute(q("revoke_key"), {"id": key_id})
            return await cur.fetchone() is not None
