"""Secrets at rest: push tokens and webhook credentials are stored encrypted (Fernet:
AES-128-CBC with an HMAC), so a copy of the database (a backup, a replica, a read-only
role) does not hand out the keys to the callers' receivers.

The key is A2A_AGENT_SECRET_KEY (a Fernet key: 32 url-safe base64 bytes) or, when that is
unset, a key made once in A2A_AGENT_HOME/secret.key (mode 0600). Every process that delivers
pushes needs the same key: set A2A_AGENT_SECRET_KEY when they run on more than one machine.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from persistence.errors import StoreError

PREFIX = "fernet:"
KEY_FILE = "secret.key"


class SecretUnreadable(StoreError):
    """A stored secret this process's key does not open."""


class SecretBox:
    def __init__(self, key: bytes) -> None:
        self._fernet = Fernet(key)
        # A key of its own for tags (what a peer's webhook call shows to be ours to take).
        self._tag_key = hmac.new(key, b"a2a-agent tags", hashlib.sha256).digest()

    @classmethod
    def from_settings(cls, key: str | None, home: Path) -> SecretBox:
        if key:
            try:
                return cls(key.encode())
            except ValueError as exc:
                raise StoreError(
                    "A2A_AGENT_SECRET_KEY is not a Fernet key (32 url-safe base64-encoded "
                    "bytes; make one with: python -c 'from cryptography.fernet import Fernet; "
                    "print(Fernet.generate_key().decode())')"
                ) from exc
        path = home / KEY_FILE
        home.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            # Written whole under a name of its own, then linked into place: processes that
            # start together (a worker and its deliverer) all read the one that won.
            draft = home / f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, Fernet.generate_key())
            finally:
                os.close(fd)
            try:
                with contextlib.suppress(FileExistsError):
                    os.link(draft, path)
            finally:
                draft.unlink()
        return cls(path.read_bytes().strip())

    def tag(self, message: str) -> str:
        """An unguessable, stable tag of `message` (the same in every process)."""
        return hmac.new(self._tag_key, message.encode(), hashlib.sha256).hexdigest()

    def seal(self, value: str | None) -> str | None:
        if not value:
            return value
        return PREFIX + self._fernet.encrypt(value.encode()).decode()

    def open(self, stored: str | None) -> str | None:
        if not stored or not stored.startswith(PREFIX):
            return stored  # written before secrets were sealed
        try:
            return self._fernet.decrypt(stored[len(PREFIX) :].encode()).decode()
        except InvalidToken as exc:
            raise SecretUnreadable(
                "a stored push secret does not open with this process's key: every process "
                "must share A2A_AGENT_SECRET_KEY"
            ) from exc
