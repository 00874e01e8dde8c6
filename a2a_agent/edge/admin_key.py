"""The first key of a fresh installation, so `make run` is usable and closed at once."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from a2a_agent.edge.auth import SCOPES, new_key
from persistence.keys import KeyStore

log = logging.getLogger(__name__)
ADMIN_KEY_FILE = "admin.key"


def admin_key_path(home: Path) -> Path:
    return home / ADMIN_KEY_FILE


async def ensure_admin_key(keys: KeyStore, home: Path) -> None:
    """If this database has no key at all, make an admin key (every scope) and write it to
    A2A_AGENT_HOME/admin.key, readable by this user only. (If the process dies between the
    two, `a2a-agent keys create` makes another.)"""
    token, stored = new_key("admin", SCOPES, name="admin (made at first start)")
    if not await keys.create(stored, first=True):
        return
    path = admin_key_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (token + "\n").encode())
    finally:
        os.close(fd)
    message = (
        f"no API key existed: made an admin key ({stored.id}) in {path} (mode 0600); send it "
        "as 'Authorization: Bearer <key>', and make keys for callers with 'a2a-agent keys create'"
    )
    log.warning(message)  # once: the start's banner says where the key is, too
