"""The typed sections of Settings, one frozen dataclass per part of the service it feeds
(`ServerSettings` ... `LogSettings`), each field beside the variable it is read from."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from a2a_agent.budget import DEFAULT_LIMITS, DEFAULT_PRICES, HARD_CAPS, Prices, parse_prices
from a2a_agent.model import DEFAULT_MODEL
from a2a_agent.peers import Peer, parse_peers
from a2a_agent.plans import ON_ITEM_FAILURE, ON_REGRESSION
from a2a_agent.settings.reading import (
    AsPath,
    Choice,
    Limits,
    Listed,
    Parsed,
    Paths,
    Patterns,
    Seconds,
    Switch,
    Whole,
    plain,
    setting,
)
from a2a_agent.sources import GitCredential, parse_credentials

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

DAY = 24 * 3600.0


# The sections --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSettings:
    """The HTTP server and the door: where it listens, which names it answers to."""

    host: str = setting("A2A_AGENT_HOST", "127.0.0.1")
    port: int = setting("A2A_AGENT_PORT", 8000, Whole(minimum=0))
    public_url: str | None = setting("A2A_AGENT_PUBLIC_URL", None)
    allowed_hosts: tuple[str, ...] = setting("A2A_AGENT_ALLOWED_HOSTS", (), Listed(lower=True))
    insecure_open: bool = setting("A2A_AGENT_INSECURE_OPEN", False, Switch("1", "0"))
    http: str = setting("A2A_AGENT_HTTP", "httptools", Choice(("httptools", "h11")))
    agent_card_path: Path = setting("A2A_AGENT_CARD", PACKAGED_CARD, AsPath())  # noqa: RUF009
    # Who runs this deployment, for the card's `provider` (both or neither; the shipped card
    # names none rather than a made-up organization).
    provider_organization: str | None = setting("A2A_AGENT_PROVIDER_ORGANIZATION", None)
    provider_url: str | None = setting("A2A_AGENT_PROVIDER_URL", None)
    # A comment on a stream quiet this long, for clients and proxies with idle read timeouts.
    stream_ping_s: float = setting("A2A_AGENT_STREAM_PING_S", 15.0, Seconds())

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


@dataclass(frozen=True)
class DatabaseSettings:
    url: str | None = setting("DATABASE_URL", None, flat="database_url")  # None: embedded
    pool_max: int = setting("A2A_AGENT_DB_POOL_MAX", 10, Whole(minimum=2), flat="db_pool_max")


@dataclass(frozen=True)
class WorkerSettings:
    """The run engine of this process: who it is, how much it runs, its supervisor's clocks."""

    executor_id: str = setting("A2A_AGENT_EXECUTOR_ID", "")  # "": <hostname>-<role>
    run_worker: bool = plain(True)  # serve --no-worker, deliver: False
    # Runs admitted at once: they wait on the model most of the time, so a worker drives
    # many; what they share is limited by the command and model slots (docs/settings.md).
    concurrency: int = setting(
        "A2A_AGENT_WORKER_CONCURRENCY", 500, Whole(minimum=1), flat="worker_concurrency"
    )
    # Steps doing their own work at once (reads, records, git), of all runs; a step waiting
    # on its effect (the model, a command) holds none. 0: four per core.
    step_concurrency: int = setting("A2A_AGENT_STEP_CONCURRENCY", 0, Whole(minimum=0))
    queue_poll_s: float = setting("A2A_AGENT_QUEUE_POLL_S", 0.5, Seconds())
    reconcile_interval_s: float = setting("A2A_AGENT_RECONCILE_INTERVAL_S", 10.0, Seconds())
    heartbeat_timeout_s: float = setting("A2A_AGENT_HEARTBEAT_TIMEOUT_S", 30.0, Seconds())
    shutdown_grace_s: float = setting("A2A_AGENT_SHUTDOWN_GRACE_S", 30.0, Seconds())
    stuck_after_s: float = setting("A2A_AGENT_STUCK_AFTER_S", 3600.0, Seconds())
    max_run_age_s: float = setting("A2A_AGENT_MAX_RUN_AGE_S", 7 * DAY, Seconds())

    @property
    def step_slots(self) -> int:
        """Steps at once: as set, or four per core."""
        return self.step_concurrency or 4 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class IntakeSettings:
    """What a message and its plan may carry (the edge checks it, the card says it)."""

    max_message_bytes: int = setting("A2A_AGENT_MAX_MESSAGE_BYTES", 256 * 1024, Whole(minimum=1024))
    max_plan_items: int = setting("A2A_AGENT_MAX_PLAN_ITEMS", 200, Whole(minimum=1))
    default_max_attempts: int = plain(2)
    max_input_bytes: int = setting("A2A_AGENT_MAX_INPUT_BYTES", 32 << 20, Whole(minimum=1024))
    max_input_files: int = setting("A2A_AGENT_MAX_INPUT_FILES", 5000, Whole(minimum=1))
    max_unpacked_bytes: int = setting(
        "A2A_AGENT_MAX_UNPACKED_BYTES", 512 << 20, Whole(minimum=1024)
    )
    # Result files this small travel in their artifact.
    inline_output_bytes: int = setting("A2A_AGENT_INLINE_OUTPUT_BYTES", 64 * 1024, Whole())
    # Tasks one caller may have that have not ended; a new one past it is refused (0: none).
    max_active_tasks: int = setting("A2A_AGENT_MAX_ACTIVE_TASKS", 1000, Whole())


@dataclass(frozen=True)
class CommandSettings:
    """Commands and the harness's git: the sandbox, timeouts, where sources may come from."""

    sandbox: bool = setting("A2A_AGENT_SANDBOX", True, Switch("bwrap", "off"))
    network: bool = setting("A2A_AGENT_COMMAND_NETWORK", False, Switch(), flat="command_network")
    shared: tuple[Path, ...] = setting(
        "A2A_AGENT_SANDBOX_SHARED", (), Paths(), flat="sandbox_shared"
    )
    env: Mapping[str, str] = plain({}, flat="command_env", factory=dict)  # COMMAND_PASSTHROUGH
    timeout_s: int = setting(
        "A2A_AGENT_COMMAND_TIMEOUT_S", 1800, Whole(minimum=1), flat="command_timeout_s"
    )
    verify_timeout_s: int = setting("A2A_AGENT_VERIFY_TIMEOUT_S", 600, Whole(minimum=1))
    output_tail_bytes: int = plain(4000)
    reverify_parallelism: int = setting("A2A_AGENT_REVERIFY_PARALLELISM", 4, Whole(minimum=1))
    # Commands running at once in a worker, of all its runs; 0: two per core.
    concurrency: int = setting(
        "A2A_AGENT_COMMAND_CONCURRENCY", 0, Whole(minimum=0), flat="command_concurrency"
    )
    # A command running longer gives its slot up (a long build cannot starve short checks).
    slot_s: float = setting("A2A_AGENT_COMMAND_SLOT_S", 10.0, Seconds(), flat="command_slot_s")
    clone_timeout_s: float = setting("A2A_AGENT_CLONE_TIMEOUT_S", 3600.0, Seconds())
    git_allowed_urls: tuple[str, ...] = setting("A2A_AGENT_GIT_ALLOWED_URLS", (), Listed())
    git_credentials: Mapping[str, GitCredential] = setting(
        "A2A_AGENT_GIT_CREDENTIALS", {}, Parsed(parse_credentials), factory=dict, secret=True
    )

    @property
    def slots(self) -> int:
        """Commands at once: as set, or two per core (a command often waits on its disk, its
        network or a child, and one per core left cores idle in the measurement)."""
        return self.concurrency or 2 * (os.cpu_count() or 1)


@dataclass(frozen=True)
class ModelSettings:
    """The model (Anthropic) and how the harness talks to it."""

    api_key: str | None = setting("ANTHROPIC_API_KEY", None, flat="anthropic_api_key", secret=True)
    base_url: str | None = setting("ANTHROPIC_BASE_URL", None, flat="anthropic_base_url")
    name: str = setting("A2A_AGENT_MODEL", DEFAULT_MODEL, flat="model")
    max_tokens: int = setting(
        "A2A_AGENT_MODEL_MAX_TOKENS", 8192, Whole(minimum=256), flat="model_max_tokens"
    )
    min_tokens: int = setting(
        "A2A_AGENT_MODEL_MIN_TOKENS", 1024, Whole(minimum=16), flat="model_min_tokens"
    )
    timeout_s: float = setting(
        "A2A_AGENT_MODEL_TIMEOUT_S", 600.0, Seconds(), flat="model_timeout_s"
    )
    max_retries: int = setting(
        "A2A_AGENT_MODEL_MAX_RETRIES", 4, Whole(minimum=0), flat="model_max_retries"
    )
    # Model calls in flight at once from a worker, of all its runs (the provider's limit).
    concurrency: int = setting(
        "A2A_AGENT_MODEL_CONCURRENCY", 500, Whole(minimum=1), flat="model_concurrency"
    )
    compact_at_tokens: int = setting("A2A_AGENT_COMPACT_AT_TOKENS", 120_000, Whole(minimum=1000))
    max_turns: int = setting("A2A_AGENT_MAX_TURNS", 60, Whole(minimum=1))
    plan_tries: int = setting("A2A_AGENT_PLAN_TRIES", 3, Whole(minimum=1))
    tool_output_bytes: int = setting("A2A_AGENT_TOOL_OUTPUT_BYTES", 16_000, Whole(minimum=256))
    # What the model is shown of a seeded repository.
    repo_context_tokens: int = setting("A2A_AGENT_REPO_CONTEXT_TOKENS", 4000, Whole())


@dataclass(frozen=True)
class BudgetSettings:
    # Caps first: the defaults are read within them.
    caps: Mapping[str, Any] = setting(
        "A2A_AGENT_BUDGET_CAPS", HARD_CAPS, Limits(), flat="budget_caps", factory=HARD_CAPS.copy
    )
    defaults: Mapping[str, Any] = setting(
        "A2A_AGENT_BUDGET_DEFAULTS",
        DEFAULT_LIMITS,
        Limits(caps="caps"),
        flat="budget_defaults",
        factory=DEFAULT_LIMITS.copy,
    )
    prices: Mapping[str, Prices] = setting(
        "A2A_AGENT_PRICES", DEFAULT_PRICES, Parsed(parse_prices), factory=DEFAULT_PRICES.copy
    )
    pause_pct: int = setting(
        "A2A_AGENT_BUDGET_PAUSE_PCT", 80, Whole(minimum=51), flat="budget_pause_pct"
    )


@dataclass(frozen=True)
class PolicySettings:
    """The policy of tasks that do not give their own, and what needs a person's approval."""

    on_item_failure: str = setting("A2A_AGENT_ON_ITEM_FAILURE", "ask", Choice(ON_ITEM_FAILURE))
    on_regression: str = setting("A2A_AGENT_ON_REGRESSION", "ask", Choice(ON_REGRESSION))
    budget_pause: bool = setting("A2A_AGENT_BUDGET_PAUSE", True, Switch())
    approval_expires_s: float = setting("A2A_AGENT_APPROVAL_EXPIRES_S", 7 * DAY, Seconds())
    irreversible_patterns: tuple[str, ...] = setting(
        "A2A_AGENT_IRREVERSIBLE", DEFAULT_IRREVERSIBLE, Patterns()
    )

    def defaults(self) -> dict[str, Any]:
        """The task policy's defaults, as a task's policy names them."""
        return {
            "on_item_failure": self.on_item_failure,
            "on_regression": self.on_regression,
            "budget_pause": self.budget_pause,
        }


@dataclass(frozen=True)
class PushSettings:
    """Push notifications: where they are sent from, where they may go, how hard we try."""

    # A sibling process of its own (the nanny's second child), this process ("inline"), or
    # nowhere here ("off": an `a2a-agent deliver` process runs elsewhere).
    delivery: str = setting(
        "A2A_AGENT_PUSH_DELIVERY",
        "process",
        Choice(("process", "inline", "off")),
        flat="push_delivery",
    )
    allow_hosts: str = setting("A2A_AGENT_PUSH_ALLOW_HOSTS", "", flat="push_allow_hosts")
    max_attempts: int = setting(
        "A2A_AGENT_PUSH_MAX_ATTEMPTS", 8, Whole(minimum=1), flat="push_max_attempts"
    )
    max_age_s: float = setting("A2A_AGENT_PUSH_MAX_AGE_S", DAY, Seconds(), flat="push_max_age_s")
    timeout_s: float = setting("A2A_AGENT_PUSH_TIMEOUT_S", 5.0, Seconds(), flat="push_timeout_s")
    backoff_s: float = setting("A2A_AGENT_PUSH_BACKOFF_S", 1.0, Seconds(), flat="push_backoff_s")
    # Seals push secrets (and peer tokens) at rest; unset: a key made under A2A_AGENT_HOME.
    secret_key: str | None = setting("A2A_AGENT_SECRET_KEY", None, secret=True)


@dataclass(frozen=True)
class PeerSettings:
    """Other A2A agents items may be delegated to."""

    agents: Mapping[str, Peer] = setting(
        "A2A_AGENT_PEERS", {}, Parsed(parse_peers), flat="peers", factory=dict, secret=True
    )
    poll_s: float = setting("A2A_AGENT_PEER_POLL_S", 5.0, Seconds(), flat="peer_poll_s")


@dataclass(frozen=True)
class RetentionSettings:
    """How long ended tasks and their records are kept (0 keeps them)."""

    task_s: float = setting(
        "A2A_AGENT_TASK_RETENTION_S", 30 * DAY, Seconds(zero=True), flat="task_retention_s"
    )
    record_s: float = setting(
        "A2A_AGENT_RECORD_RETENTION_S", 7 * DAY, Seconds(zero=True), flat="record_retention_s"
    )
    push_s: float = setting(
        "A2A_AGENT_PUSH_RETENTION_S", 7 * DAY, Seconds(), flat="push_retention_s"
    )


@dataclass(frozen=True)
class LogSettings:
    format: str = setting(
        "A2A_AGENT_LOG_FORMAT", "text", Choice(("text", "json")), flat="log_format"
    )
    level: str = setting(
        "A2A_AGENT_LOG_LEVEL",
        "info",
        Choice(("debug", "info", "warning", "error")),
        flat="log_level",
    )


SECTIONS: dict[str, type[Any]] = {
    "server": ServerSettings,
    "database": DatabaseSettings,
    "worker": WorkerSettings,
    "intake": IntakeSettings,
    "commands": CommandSettings,
    "model": ModelSettings,
    "budget": BudgetSettings,
    "policy": PolicySettings,
    "push": PushSettings,
    "peers": PeerSettings,
    "retention": RetentionSettings,
    "logging": LogSettings,
}
