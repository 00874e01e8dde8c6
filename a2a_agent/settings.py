"""Settings, read once from the environment into a typed object."""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from a2a_agent.budget import (
    DEFAULT_LIMITS,
    DEFAULT_PRICES,
    HARD_CAPS,
    Prices,
    effective_limits,
    parse_prices,
)
from a2a_agent.errors import ConfigError, PlanError
from a2a_agent.model import DEFAULT_MODEL
from a2a_agent.peers import Peer, parse_peers
from a2a_agent.plans import ON_ITEM_FAILURE, ON_REGRESSION
from a2a_agent.sources import GitCredential, parse_credentials

# Bumped by hand only when the step sequence of a workflow changes in a way DBOS patching
# cannot express; every in-flight run is recovered only by a process with the same version.
# 2: typed step results (issue 8); 3: workflow segments and the steps around pauses (issue 10).
APPLICATION_VERSION = "a2a-agent-3"

# Commands that need a person's approval before they run (A2A_AGENT_IRREVERSIBLE overrides).
DEFAULT_IRREVERSIBLE = (
    r"\bgit\s+push\b",
    r"\brm\s+-[A-Za-z]*(r[A-Za-z]*f|f[A-Za-z]*r)",
    r"\b(kubectl|helm)\s+(apply|create|delete|install|upgrade|rollout)\b",
    r"\bterraform\s+(apply|destroy)\b",
    r"\b(curl|wget)\b.*(-X\s*|--request\s+)(POST|PUT|PATCH|DELETE)\b",
    r"\bdeploy\b",
)

# Shipped in the package (a copy of the repository's agent_card.json); A2A_AGENT_CARD overrides.
PACKAGED_CARD = Path(str(resources.files("a2a_agent").joinpath("agent_card.json")))


def _int(env: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be at least {minimum}, got {value}")
    return value


def _float(env: Mapping[str, str], name: str, default: float, *, zero: bool = False) -> float:
    """A positive number (or 0, where 0 means "never", `zero`)."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{name} must be positive{' or 0' if zero else ''}, got {value}")
    return value


def _patterns(env: Mapping[str, str], name: str) -> tuple[str, ...]:
    """Regular expressions, one per line; unset: the defaults; empty: none."""
    raw = env.get(name)
    if raw is None:
        return DEFAULT_IRREVERSIBLE
    patterns = tuple(line for line in raw.splitlines() if line.strip())
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{name}: {pattern!r} is not a regular expression: {exc}") from None
    return patterns


def _choice(env: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = env.get(name) or default
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _json_limits(
    env: Mapping[str, str], name: str, base: Mapping[str, Any], caps: Mapping[str, Any]
) -> dict[str, Any]:
    """Budget limits from a JSON setting, over `base`, each at most `caps`."""
    raw = env.get(name)
    if not raw:
        return dict(base)
    try:
        given = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} is not JSON: {exc}") from exc
    try:
        return effective_limits(given, base, caps)
    except PlanError as exc:
        raise ConfigError(f"{name}: {exc}") from exc


@dataclass(frozen=True)
class Settings:
    """Everything the service reads from its environment, read once at start-up."""

    home: Path
    database_url: str | None
    host: str = "127.0.0.1"
    port: int = 8000
    public_url: str | None = None
    sandbox: bool = True  # commands in bubblewrap (A2A_AGENT_SANDBOX=off: without isolation)
    command_network: bool = False  # the network inside the sandbox (A2A_AGENT_COMMAND_NETWORK)
    sandbox_shared: tuple[Path, ...] = ()  # writable in every sandbox (A2A_AGENT_SANDBOX_SHARED)
    insecure_open: bool = False  # no authentication (loopback only): local experiments
    allowed_hosts: tuple[str, ...] = ()  # Host headers accepted beside the bind and public URL
    executor_id: str = ""
    run_worker: bool = True
    worker_concurrency: int = 4
    max_message_bytes: int = 256 * 1024
    max_plan_items: int = 200
    command_timeout_s: int = 1800
    verify_timeout_s: int = 600
    output_tail_bytes: int = 4000
    default_max_attempts: int = 2
    reconcile_interval_s: float = 10.0
    queue_poll_s: float = 0.5
    heartbeat_timeout_s: float = 30.0
    shutdown_grace_s: float = 30.0
    stuck_after_s: float = 3600.0
    max_run_age_s: float = 7 * 24 * 3600.0
    agent_card_path: Path = PACKAGED_CARD
    command_env: Mapping[str, str] = field(default_factory=dict)
    db_pool_max: int = 10
    anthropic_api_key: str | None = field(default=None, repr=False)
    secret_key: str | None = field(default=None, repr=False)  # seals push secrets at rest
    anthropic_base_url: str | None = None
    model: str = DEFAULT_MODEL
    model_max_tokens: int = 8192
    model_min_tokens: int = 1024
    model_timeout_s: float = 600.0
    model_max_retries: int = 4
    compact_at_tokens: int = 120_000
    max_turns: int = 60
    plan_tries: int = 3
    tool_output_bytes: int = 16_000
    budget_defaults: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    budget_caps: Mapping[str, Any] = field(default_factory=lambda: dict(HARD_CAPS))
    prices: Mapping[str, Prices] = field(default_factory=lambda: dict(DEFAULT_PRICES))
    budget_pause_pct: int = 80
    approval_expires_s: float = 7 * 24 * 3600.0
    on_item_failure: str = "ask"
    on_regression: str = "ask"  # a done item's check fails when re-verified
    reverify_parallelism: int = 4  # independent checks re-verified at once
    budget_pause: bool = True
    push_allow_hosts: str = ""
    push_max_attempts: int = 8
    push_max_age_s: float = 24 * 3600.0
    push_timeout_s: float = 5.0
    push_backoff_s: float = 1.0
    push_retention_s: float = 7 * 24 * 3600.0
    task_retention_s: float = 30 * 24 * 3600.0  # ended tasks (and their events); 0 keeps them
    record_retention_s: float = 7 * 24 * 3600.0  # their step records, events, workspaces
    # Where this worker's push notifications are sent from: a sibling process of its own
    # (the nanny's second child; the default), this process ("inline"), or nowhere here
    # ("off": an `a2a-agent deliver` process runs elsewhere).
    push_delivery: str = "process"
    irreversible_patterns: tuple[str, ...] = DEFAULT_IRREVERSIBLE
    # Work on the caller's code: where sources may come from and what they may hold.
    git_allowed_urls: tuple[str, ...] = ()  # URL prefixes taken as they are (file:// too)
    git_credentials: Mapping[str, GitCredential] = field(default_factory=dict, repr=False)
    max_input_bytes: int = 32 << 20  # files a message carries or points to
    max_input_files: int = 5000  # members of an archive
    max_unpacked_bytes: int = 512 << 20  # an archive unpacked
    clone_timeout_s: float = 3600.0
    inline_output_bytes: int = 64 * 1024  # result files this small travel in their artifact
    repo_context_tokens: int = 4000  # what the model is shown of a seeded repository
    log_format: str = "text"  # or json: one JSON object a line
    peers: Mapping[str, Peer] = field(default_factory=dict, repr=False)  # other A2A agents
    peer_poll_s: float = 5.0  # how often a peer's task we wait on is looked at, unpushed
    log_level: str = "info"
    fault_file: Path | None = None
    http: str = "httptools"

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

    @property
    def url(self) -> str:
        return self.public_url or f"http://{self.host}:{self.port}"

    @property
    def host_names(self) -> list[str]:
        """Host headers this server answers to (DNS rebinding sends another name)."""
        names = {"localhost", "127.0.0.1", "::1", "[::1]", self.host.lower(), *self.allowed_hosts}
        if self.public_url:
            public = urlsplit(self.public_url).hostname
            if public:
                names.add(public.lower())
        if self.host in ("0.0.0.0", "::") and not self.allowed_hosts and not self.public_url:
            return ["*"]  # bound everywhere and told no name: every name (keys still apply)
        return sorted(names)

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, role: str = "serve") -> Settings:
        env = os.environ if env is None else env
        home = Path(env.get("A2A_AGENT_HOME") or "./.a2a-agent").resolve()
        port = _int(env, "A2A_AGENT_PORT", 8000, minimum=0)
        executor_id = env.get("A2A_AGENT_EXECUTOR_ID") or f"{socket.gethostname()}-{role}"
        # Commands the harness runs see a small, predictable environment, never our secrets.
        passthrough = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
        command_env = {name: env[name] for name in passthrough if name in env}
        caps = _json_limits(env, "A2A_AGENT_BUDGET_CAPS", HARD_CAPS, HARD_CAPS)
        defaults = _json_limits(env, "A2A_AGENT_BUDGET_DEFAULTS", DEFAULT_LIMITS, caps)
        return cls(
            home=home,
            database_url=env.get("DATABASE_URL") or None,
            host=env.get("A2A_AGENT_HOST") or "127.0.0.1",
            port=port,
            public_url=env.get("A2A_AGENT_PUBLIC_URL") or None,
            sandbox=_choice(env, "A2A_AGENT_SANDBOX", ("bwrap", "off"), "bwrap") == "bwrap",
            command_network=_choice(env, "A2A_AGENT_COMMAND_NETWORK", ("on", "off"), "off") == "on",
            sandbox_shared=tuple(
                Path(p.strip()).resolve()
                for p in (env.get("A2A_AGENT_SANDBOX_SHARED") or "").split(",")
                if p.strip()
            ),
            insecure_open=_choice(env, "A2A_AGENT_INSECURE_OPEN", ("0", "1"), "0") == "1",
            allowed_hosts=tuple(
                h.strip().lower()
                for h in (env.get("A2A_AGENT_ALLOWED_HOSTS") or "").split(",")
                if h.strip()
            ),
            executor_id=executor_id,
            worker_concurrency=_int(env, "A2A_AGENT_WORKER_CONCURRENCY", 4, minimum=1),
            max_message_bytes=_int(env, "A2A_AGENT_MAX_MESSAGE_BYTES", 256 * 1024, minimum=1024),
            max_plan_items=_int(env, "A2A_AGENT_MAX_PLAN_ITEMS", 200, minimum=1),
            command_timeout_s=_int(env, "A2A_AGENT_COMMAND_TIMEOUT_S", 1800, minimum=1),
            verify_timeout_s=_int(env, "A2A_AGENT_VERIFY_TIMEOUT_S", 600, minimum=1),
            reconcile_interval_s=_float(env, "A2A_AGENT_RECONCILE_INTERVAL_S", 10.0),
            queue_poll_s=_float(env, "A2A_AGENT_QUEUE_POLL_S", 0.5),
            heartbeat_timeout_s=_float(env, "A2A_AGENT_HEARTBEAT_TIMEOUT_S", 30.0),
            shutdown_grace_s=_float(env, "A2A_AGENT_SHUTDOWN_GRACE_S", 30.0),
            stuck_after_s=_float(env, "A2A_AGENT_STUCK_AFTER_S", 3600.0),
            max_run_age_s=_float(env, "A2A_AGENT_MAX_RUN_AGE_S", 7 * 24 * 3600.0),
            agent_card_path=Path(env.get("A2A_AGENT_CARD") or PACKAGED_CARD),
            command_env=command_env,
            db_pool_max=_int(env, "A2A_AGENT_DB_POOL_MAX", 10, minimum=2),
            anthropic_api_key=env.get("ANTHROPIC_API_KEY") or None,
            secret_key=env.get("A2A_AGENT_SECRET_KEY") or None,
            anthropic_base_url=env.get("ANTHROPIC_BASE_URL") or None,
            model=env.get("A2A_AGENT_MODEL") or DEFAULT_MODEL,
            model_max_tokens=_int(env, "A2A_AGENT_MODEL_MAX_TOKENS", 8192, minimum=256),
            model_min_tokens=_int(env, "A2A_AGENT_MODEL_MIN_TOKENS", 1024, minimum=16),
            model_timeout_s=_float(env, "A2A_AGENT_MODEL_TIMEOUT_S", 600.0),
            model_max_retries=_int(env, "A2A_AGENT_MODEL_MAX_RETRIES", 4, minimum=0),
            compact_at_tokens=_int(env, "A2A_AGENT_COMPACT_AT_TOKENS", 120_000, minimum=1000),
            max_turns=_int(env, "A2A_AGENT_MAX_TURNS", 60, minimum=1),
            plan_tries=_int(env, "A2A_AGENT_PLAN_TRIES", 3, minimum=1),
            tool_output_bytes=_int(env, "A2A_AGENT_TOOL_OUTPUT_BYTES", 16_000, minimum=256),
            budget_defaults=defaults,
            budget_caps=caps,
            prices=parse_prices(env.get("A2A_AGENT_PRICES")),
            budget_pause_pct=_int(env, "A2A_AGENT_BUDGET_PAUSE_PCT", 80, minimum=51),
            approval_expires_s=_float(env, "A2A_AGENT_APPROVAL_EXPIRES_S", 7 * 24 * 3600.0),
            on_item_failure=_choice(env, "A2A_AGENT_ON_ITEM_FAILURE", ON_ITEM_FAILURE, "ask"),
            on_regression=_choice(env, "A2A_AGENT_ON_REGRESSION", ON_REGRESSION, "ask"),
            reverify_parallelism=_int(env, "A2A_AGENT_REVERIFY_PARALLELISM", 4, minimum=1),
            budget_pause=_choice(env, "A2A_AGENT_BUDGET_PAUSE", ("on", "off"), "on") == "on",
            push_allow_hosts=env.get("A2A_AGENT_PUSH_ALLOW_HOSTS") or "",
            push_max_attempts=_int(env, "A2A_AGENT_PUSH_MAX_ATTEMPTS", 8, minimum=1),
            push_max_age_s=_float(env, "A2A_AGENT_PUSH_MAX_AGE_S", 24 * 3600.0),
            push_timeout_s=_float(env, "A2A_AGENT_PUSH_TIMEOUT_S", 5.0),
            push_backoff_s=_float(env, "A2A_AGENT_PUSH_BACKOFF_S", 1.0),
            push_retention_s=_float(env, "A2A_AGENT_PUSH_RETENTION_S", 7 * 24 * 3600.0),
            task_retention_s=_float(env, "A2A_AGENT_TASK_RETENTION_S", 30 * 24 * 3600.0, zero=True),
            record_retention_s=_float(
                env, "A2A_AGENT_RECORD_RETENTION_S", 7 * 24 * 3600.0, zero=True
            ),
            push_delivery=_choice(
                env, "A2A_AGENT_PUSH_DELIVERY", ("process", "inline", "off"), "process"
            ),
            irreversible_patterns=_patterns(env, "A2A_AGENT_IRREVERSIBLE"),
            git_allowed_urls=tuple(
                u.strip()
                for u in (env.get("A2A_AGENT_GIT_ALLOWED_URLS") or "").split(",")
                if u.strip()
            ),
            git_credentials=parse_credentials(env.get("A2A_AGENT_GIT_CREDENTIALS")),
            max_input_bytes=_int(env, "A2A_AGENT_MAX_INPUT_BYTES", 32 << 20, minimum=1024),
            max_input_files=_int(env, "A2A_AGENT_MAX_INPUT_FILES", 5000, minimum=1),
            max_unpacked_bytes=_int(env, "A2A_AGENT_MAX_UNPACKED_BYTES", 512 << 20, minimum=1024),
            clone_timeout_s=_float(env, "A2A_AGENT_CLONE_TIMEOUT_S", 3600.0),
            inline_output_bytes=_int(env, "A2A_AGENT_INLINE_OUTPUT_BYTES", 64 * 1024, minimum=0),
            repo_context_tokens=_int(env, "A2A_AGENT_REPO_CONTEXT_TOKENS", 4000, minimum=0),
            log_format=_choice(env, "A2A_AGENT_LOG_FORMAT", ("text", "json"), "text"),
            peers=parse_peers(env.get("A2A_AGENT_PEERS")),
            peer_poll_s=_float(env, "A2A_AGENT_PEER_POLL_S", 5.0),
            log_level=_choice(
                env, "A2A_AGENT_LOG_LEVEL", ("debug", "info", "warning", "error"), "info"
            ),
            fault_file=Path(env["A2A_AGENT_FAULT_FILE"])
            if env.get("A2A_AGENT_FAULT_FILE")
            else None,
        )
