"""Where a task's workspace may come from and its commits go to: git URLs, files the message
carries or points to, an earlier task of the same owner.

The rules are the operator's: URLs that start with a prefix in A2A_AGENT_GIT_ALLOWED_URLS
are allowed as they are (the only way to allow `file://`); any other must be http(s) to a
host that resolves to public addresses only, as for webhooks (the host allowlist of
A2A_AGENT_PUSH_ALLOW_HOSTS applies too), and a refusal says so in words of what the URL is
for (a repository, an input file), not a webhook's. A credential is named, never sent: the message
says `"credential": "<name>"` and the server holds the secret (A2A_AGENT_GIT_CREDENTIALS).
The edge checks all of this before anything is stored; the harness checks the URL again
when it fetches, since what a name resolves to can change.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlsplit

from a2a_agent.delivery.guard import AllowList, Refusal, UrlRefused, check_addresses, resolve
from a2a_agent.errors import ConfigError, PlanError

GIT_KEYS = frozenset({"url", "ref", "depth", "credential"})
PUBLISH_KEYS = frozenset({"url", "branch", "credential"})
WORKSPACE_KEYS = frozenset({"git", "from_task"})
# A ref a caller may name: a branch, a tag or a commit, never an option or a path trick.
REF = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,254}$")
ARCHIVE_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")
ARCHIVE_TYPES = frozenset(
    {
        "application/x-tar",
        "application/tar",
        "application/gzip",
        "application/x-gzip",
        "application/x-compressed-tar",
        "application/x-bzip2",
        "application/x-xz",
        "application/zip",
    }
)
MAX_DEPTH = 1_000_000


@dataclass(frozen=True)
class GitCredential:
    """A secret the server holds for a git host: HTTP basic (a token is the password)."""

    username: str
    password: str = field(repr=False)


def parse_credentials(raw: str | None) -> dict[str, GitCredential]:
    """A2A_AGENT_GIT_CREDENTIALS: {"name": {"username": ..., "password": ...}}."""
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"A2A_AGENT_GIT_CREDENTIALS is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError('A2A_AGENT_GIT_CREDENTIALS must be {"name": {"username", "password"}}')
    found = {}
    for name, value in data.items():
        if not isinstance(value, dict) or not isinstance(value.get("password"), str):
            raise ConfigError(f"A2A_AGENT_GIT_CREDENTIALS[{name!r}] needs a password (or token)")
        found[str(name)] = GitCredential(
            str(value.get("username") or "x-access-token"), value["password"]
        )
    return found


def is_archive(filename: str | None, media_type: str) -> bool:
    name = (filename or "").lower()
    return media_type in ARCHIVE_TYPES or name.endswith(ARCHIVE_SUFFIXES)


def safe_relative(name: str, where: str) -> str:
    """A file name from the message as a path inside the workspace, or PlanError."""
    path = PurePosixPath(name)
    if (
        not name
        or len(name) > 255
        or path.is_absolute()
        or ".." in path.parts
        or "\\" in name
        or any(ord(c) < 32 for c in name)
        or path.parts[:1] == (".git",)
    ):
        raise PlanError(
            f"{where}: the file name {name!r} is not a plain relative path inside the "
            "workspace (no leading /, no .., not in .git)"
        )
    return str(path)


@dataclass(frozen=True)
class SourceRules:
    allowed_prefixes: tuple[str, ...] = ()
    credentials: Mapping[str, GitCredential] = field(default_factory=dict)
    allow_hosts: AllowList = field(default_factory=lambda: AllowList.parse(""))

    def listed(self, url: str) -> bool:
        return any(url.startswith(prefix) for prefix in self.allowed_prefixes)

    def check_syntax(self, url: Any, where: str) -> None:
        """What can be told without the network: listed, or an http(s) URL without secrets."""
        if not isinstance(url, str) or not url.strip():
            raise PlanError(f"{where}.url must be a non-empty URL")
        if any(ord(c) < 32 for c in url) or url.startswith("-"):
            raise PlanError(f"{where}.url {url!r} is not a URL")
        if self.listed(url):
            return
        parts = urlsplit(url)
        if parts.scheme == "file":
            raise PlanError(
                f"{where}.url: file:// URLs are taken only when the server lists them in "
                "A2A_AGENT_GIT_ALLOWED_URLS"
            )
        if parts.scheme not in ("https", "http") or not parts.hostname:
            raise PlanError(
                f"{where}.url must be an https:// URL (or one the server lists in "
                f"A2A_AGENT_GIT_ALLOWED_URLS); got {url!r}"
            )
        if parts.username or parts.password:
            raise PlanError(
                f"{where}.url must not carry credentials; name one the server holds with "
                '"credential"'
            )

    async def check_url(self, url: str, where: str) -> None:
        """A git URL's syntax, and for a URL not listed, that its host is public (or
        allowlisted)."""
        await self._check(url, where, f"{where}.url", repository_refused)

    async def check_file_url(self, url: str, where: str) -> None:
        """The same for the URL of an input file (a FilePart's `url`), refused in its words."""
        await self._check(url, where, f"{where}'s URL", file_refused)

    async def _check(self, url: str, where: str, named: str, refused: Refusal) -> None:
        self.check_syntax(url, where)
        if self.listed(url):
            return
        parts = urlsplit(url)
        host = parts.hostname or ""
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            check_addresses(host, await resolve(host, port), self.allow_hosts, refused)
        except (UrlRefused, ValueError) as exc:
            raise PlanError(f"{named} is refused: {exc}") from None

    def credential(self, name: Any, where: str) -> str | None:
        if name is None:
            return None
        if not isinstance(name, str) or name not in self.credentials:
            known = sorted(self.credentials) or "none are configured"
            raise PlanError(
                f"{where}.credential {name!r} is not a credential this server holds "
                f"(A2A_AGENT_GIT_CREDENTIALS; known: {known})"
            )
        return name


# The allowlists that let a URL reach a private address; the host list is the one webhooks use.
ALLOWED_BY = (
    "unless the server lists a prefix of the URL in A2A_AGENT_GIT_ALLOWED_URLS or the host in "
    "A2A_AGENT_PUSH_ALLOW_HOSTS (the host allowlist webhooks, git URLs and input files share)"
)


def file_refused(host: str, private: Sequence[str]) -> str:
    return (
        f"its host {host!r} resolves to {', '.join(private)}: input files are not fetched from "
        f"loopback, private, link-local or metadata addresses {ALLOWED_BY}; or send the "
        "file's bytes in the part (raw) instead of its URL"
    )


def repository_refused(host: str, private: Sequence[str]) -> str:
    return (
        f"its host {host!r} resolves to {', '.join(private)}: repositories on loopback, "
        f"private, link-local or metadata addresses are not cloned or published to {ALLOWED_BY}"
    )


def local_path(url: str) -> str | None:
    """The directory a file:// URL names (None for other URLs)."""
    parts = urlsplit(url)
    return unquote(parts.path) if parts.scheme == "file" else None


def parse_git(value: Any, rules: SourceRules, where: str) -> dict[str, Any]:
    """{"url", "ref"?, "depth"?, "credential"?} as stored in the task's seed."""
    if not isinstance(value, Mapping):
        raise PlanError(f'{where} must be an object {{"url", "ref", "depth", "credential"}}')
    extra = sorted(set(value) - GIT_KEYS)
    if extra:
        raise PlanError(f"{where} has unknown field(s) {extra}; allowed: {sorted(GIT_KEYS)}")
    rules.check_syntax(value.get("url"), where)
    ref = value.get("ref", "HEAD")
    if not isinstance(ref, str) or not REF.fullmatch(ref) or ".." in ref or ref.endswith(".lock"):
        raise PlanError(f"{where}.ref must be a branch, tag or commit name; got {ref!r}")
    depth = value.get("depth")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, int | float) or depth != int(depth):
            raise PlanError(f"{where}.depth must be a whole number")
        if not 1 <= int(depth) <= MAX_DEPTH:
            raise PlanError(f"{where}.depth must be between 1 and {MAX_DEPTH}")
        depth = int(depth)
    return {
        "url": value["url"],
        "ref": ref,
        "depth": depth,
        "credential": rules.credential(value.get("credential"), where),
    }


def parse_publish(value: Any, rules: SourceRules) -> dict[str, Any]:
    """{"git": {"url", "branch", "credential"?}}: where the commits go once the task is done."""
    if not isinstance(value, Mapping) or set(value) != {"git"}:
        raise PlanError('"publish" must be {"git": {"url", "branch", "credential"}}')
    git = value["git"]
    where = "publish.git"
    if not isinstance(git, Mapping):
        raise PlanError(f"{where} must be an object")
    extra = sorted(set(git) - PUBLISH_KEYS)
    if extra:
        raise PlanError(f"{where} has unknown field(s) {extra}; allowed: {sorted(PUBLISH_KEYS)}")
    rules.check_syntax(git.get("url"), where)
    branch = git.get("branch")
    if (
        not isinstance(branch, str)
        or not REF.fullmatch(branch)
        or ".." in branch
        or branch.endswith((".lock", "/"))
    ):
        raise PlanError(f"{where}.branch must be a branch name; got {branch!r}")
    return {
        "url": git["url"],
        "branch": branch,
        "credential": rules.credential(git.get("credential"), where),
    }
