"""Push configs and their delivery from the event log.

A config is a row with a cursor (`acked_seq`: the last of its task's events the receiver
acknowledged). The deliverer claims configs with events after their cursor (a lease, so a
dead deliverer's claim runs out), sends a batch of events one by one in order, and moves the
cursor past those answered with a 2xx, in one statement that also reads the next batch: at
least once, in order per task, and a slow receiver holds only its own row.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from persistence.db import Pool, read, transaction
from persistence.errors import StoreError
from persistence.records import JSON
from persistence.safe import optional_jsonb
from persistence.secrets import SecretBox
from persistence.sql import q


@dataclass(frozen=True)
class PushConfig:
    task_id: str
    id: str
    url: str
    token: str | None = None
    authentication: JSON | None = None  # {scheme, credentials}
    acked_seq: int = 0
    state: str = "active"
    attempts: int = 0
    delivered: int = 0
    last_error: str | None = None
    protocol: str = "1.0"  # the A2A version of the client that made it: the body's shape


@dataclass(frozen=True)
class PushEvent:
    seq: int
    body: JSON
    age_s: float


@dataclass(frozen=True)
class Claimed:
    config: PushConfig
    context_id: str
    events: list[PushEvent]  # the first batch to send, read with the claim
    # A 0.3 config's task as of its cursor: the last status event and the last event of each
    # artifact up to acked_seq, in order (empty for a 1.0 config).
    base: list[PushEvent] = field(default_factory=list)


def _events(data: Any) -> list[PushEvent]:
    return [PushEvent(int(e["seq"]), e["body"], float(e["age_s"])) for e in data or ()]


class SigningKeys(Protocol):
    """The keys notifications are signed with (newest first), shared by every process."""

    async def signing_keys(self) -> list[tuple[str, str]]: ...
    async def add_signing_key(self, kid: str, pem: str) -> None: ...


class PushConfigStore(Protocol):
    """What the edge needs: a task owner's webhooks."""

    async def put(self, config: PushConfig, owner: str, *, from_seq: int) -> PushConfig: ...
    async def configs(
        self, task_id: str, owner: str, config_id: str | None
    ) -> list[PushConfig]: ...
    async def delete(self, task_id: str, owner: str, config_id: str) -> bool: ...


class PushOutbox(Protocol):
    """What the deliverer (and an operator) needs."""

    async def claim(self, limit: int, lease_s: float, batch: int) -> list[Claimed]: ...
    async def delivered(
        self, config: PushConfig, from_seq: int, seq: int, *, lease_s: float, batch: int
    ) -> list[PushEvent] | None: ...
    async def failed(
        self,
        config: PushConfig,
        from_seq: int,
        seq: int,
        *,
        attempts: int,
        error: str,
        delay_s: float,
        dead: bool,
    ) -> None: ...
    async def release(self, config: PushConfig) -> None: ...
    async def dead(self) -> list[PushConfig]: ...
    async def retry(self, task_id: str, config_id: str | None) -> list[str]: ...


def _config(row: dict[str, Any]) -> PushConfig:
    return PushConfig(**{k: row[k] for k in row if k in PushConfig.__dataclass_fields__})


class PostgresPushStore:
    """Tokens and credentials are sealed by `box` on the way in and opened on the way out
    (without a box, as for the operator's listing, they stay sealed)."""

    def __init__(self, pool: Pool, box: SecretBox | None = None) -> None:
        self._pool = pool
        self._box = box

    def _sealed(self, config: PushConfig) -> tuple[str | None, JSON | None]:
        if self._box is None:
            raise StoreError("storing a push config needs the secret key")
        auth = dict(config.authentication) if config.authentication else None
        if auth and auth.get("credentials"):
            auth["credentials"] = self._box.seal(str(auth["credentials"]))
        return self._box.seal(config.token), auth

    def _opened(self, row: dict[str, Any]) -> PushConfig:
        config = _config(row)
        if self._box is None:
            return config
        auth = dict(config.authentication) if config.authentication else None
        if auth and auth.get("credentials"):
            auth["credentials"] = self._box.open(str(auth["credentials"]))
        return replace(config, token=self._box.open(config.token), authentication=auth)

    async def _rows(self, name: str, params: JSON) -> list[dict[str, Any]]:
        async with read(self._pool) as conn:
            cur = await conn.execute(q(name), params)
            return list(await cur.fetchall()) if cur.description else []

    # ---- the edge -----------------------------------------------------------------------

    async def put(self, config: PushConfig, owner: str, *, from_seq: int) -> PushConfig:
        """Register (or replace) a webhook; it gets the task's events after `from_seq`."""
        token, authentication = self._sealed(config)
        rows = await self._rows(
            "put_push_config",
            {
                "task_id": config.task_id,
                "id": config.id,
                "owner": owner,
                "url": config.url,
                "token": token,
                "authentication": optional_jsonb(authentication),
                "acked_seq": from_seq,
                "protocol": config.protocol,
            },
        )
        return self._opened(rows[0])

    async def configs(self, task_id: str, owner: str, config_id: str | None) -> list[PushConfig]:
        rows = await self._rows(
            "get_push_configs", {"task_id": task_id, "owner": owner, "id": config_id}
        )
        return [self._opened(r) for r in rows]

    async def delete(self, task_id: str, owner: str, config_id: str) -> bool:
        """Whether there was such a config to delete."""
        rows = await self._rows(
            "delete_push_config", {"task_id": task_id, "owner": owner, "id": config_id}
        )
        return bool(rows)

    # ---- the deliverer ------------------------------------------------------------------

    async def claim(self, limit: int, lease_s: float, batch: int) -> list[Claimed]:
        rows = await self._rows(
            "claim_pushes", {"limit": limit, "lease_s": lease_s, "batch": batch}
        )
        return [
            Claimed(self._opened(r), r["context_id"], _events(r["events"]), _events(r["base"]))
            for r in rows
        ]

    async def delivered(
        self, config: PushConfig, from_seq: int, seq: int, *, lease_s: float, batch: int
    ) -> list[PushEvent] | None:
        """Move the cursor from `from_seq - 1` past `seq`; the next batch (empty when caught
        up), or None when this deliverer's lease ran out and another took the config."""
        rows = await self._rows(
            "push_delivered",
            {
                "task_id": config.task_id,
                "id": config.id,
                "from_seq": from_seq,
                "seq": seq,
                "lease_s": lease_s,
                "batch": batch,
            },
        )
        return _events(rows[0]["events"]) if rows else None

    async def failed(
        self,
        config: PushConfig,
        from_seq: int,
        seq: int,
        *,
        attempts: int,
        error: str,
        delay_s: float,
        dead: bool,
    ) -> None:
        """Event `seq` failed (`attempts` times now); those before it were taken."""
        await self._rows(
            "push_failed",
            {
                "task_id": config.task_id,
                "id": config.id,
                "from_seq": from_seq,
                "seq": seq,
                "attempts": attempts,
                "error": error[:500],
                "delay_s": delay_s,
                "dead": dead,
            },
        )

    async def release(self, config: PushConfig) -> None:
        await self._rows("push_released", {"task_id": config.task_id, "id": config.id})

    async def dead(self) -> list[PushConfig]:
        return [_config(r) for r in await self._rows("dead_pushes", {})]

    async def retry(self, task_id: str, config_id: str | None) -> list[str]:
        rows = await self._rows("retry_pushes", {"task_id": task_id, "id": config_id})
        return [str(r["id"]) for r in rows]

    # ---- signing keys -------------------------------------------------------------------

    async def signing_keys(self) -> list[tuple[str, str]]:
        return [(r["kid"], r["private_pem"]) for r in await self._rows("signing_keys", {})]

    async def add_signing_key(self, kid: str, pem: str) -> None:
        """Store `pem` as the signing key unless one exists (made by a process that started
        at the same time: then that one is every process's key)."""
        async with transaction(self._pool) as conn:
            await conn.execute(q("lock_signing_keys"))
            await conn.execute(q("add_signing_key"), {"kid": kid, "pem": pem})
