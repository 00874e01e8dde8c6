"""Settings, read once from the environment into typed sections.

Each section is a frozen dataclass for the part of the service it feeds (the HTTP server,
the database, the worker, the sandboxed commands, the model, ...). A field read from the
environment is declared with `setting(VARIABLE, default, how)`: the variable's name sits
beside the field, and the dataclass default is the fallback when the variable is unset, so
every default is written once. `Settings.from_env` reads every section through that table;
docs/settings.md lists the same table (tests/test_settings.py holds the two equal).
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast
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

# Commands the harness runs see a small, predictable environment, never our secrets.
COMMAND_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")

DAY = 24 * 3600.0

T = TypeVar("T")

_ENV = "a2a_agent.env"  # field metadata: the variable a field is read from
_HOW = "a2a_agent.how"  # ... and how its text becomes the value
_FLAT = "a2a_agent.flat"  # the field's name in the flat Settings before sections


# How a variable's text becomes a value -------------------------------------------------------


class How:
    """Turns a variable's text into the field's value (never called for an unset variable)."""

    empty_is_unset: ClassVar[bool] = True  # "" reads as the default

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> Any:
        """`default`: the field's; `earlier`: the fields of its section read before it."""
        return raw


@dataclass(frozen=True)
class Whole(How):
    minimum: int = 0

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
        if value < self.minimum:
            raise ConfigError(f"{name} must be at least {self.minimum}, got {value}")
        return value


@dataclass(frozen=True)
class Seconds(How):
    """A positive number (or 0, where 0 means "never", `zero`)."""

    zero: bool = False

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> float:
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {raw!r}") from None
        if value < 0 or (value == 0 and not self.zero):
            raise ConfigError(f"{name} must be positive{' or 0' if self.zero else ''}, got {value}")
        return value


@dataclass(frozen=True)
class Choice(How):
    allowed: tuple[str, ...]

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> str:
        if raw not in self.allowed:
            raise ConfigError(f"{name} must be one of {', '.join(self.allowed)}, got {raw!r}")
        return raw


@dataclass(frozen=True)
class Switch(How):
    """Two words for a bool: `on` is True, `off` False."""

    on: str = "on"
    off: str = "off"

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> bool:
        return Choice((self.on, self.off)).parse(name, raw, default, earlier) == self.on


@dataclass(frozen=True)
class Listed(How):
    """Comma-separated; blanks dropped."""

    lower: bool = False

    def parse(
        self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]
    ) -> tuple[str, ...]:
        return tuple(
            p.strip().lower() if self.lower else p.strip() for p in raw.split(",") if p.strip()
        )


class Paths(How):
    """Comma-separated directories, resolved."""

    def parse(
        self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]
    ) -> tuple[Path, ...]:
        return tuple(Path(p).resolve() for p in Listed().parse(name, raw, default, earlier))


class AsPath(How):
    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> Path:
        return Path(raw)


class Patterns(How):
    """Regular expressions, one per line; unset: the defaults; empty: none."""

    empty_is_unset = False

    def parse(
        self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]
    ) -> tuple[str, ...]:
        patterns = tuple(line for line in raw.splitlines() if line.strip())
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"{name}: {pattern!r} is not a regular expression: {exc}"
                ) from None
        return patterns


@dataclass(frozen=True)
class Parsed(How):
    """Text a function of the module it belongs to parses (JSON tables: peers, prices, ...)."""

    function: Callable[[str], Any]

    def parse(self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]) -> Any:
        return self.function(raw)


@dataclass(frozen=True)
class Limits(How):
    """Budget limits as JSON, over the field's default, each at most `caps` (another field of
    the section, read before) or the hard caps."""

    caps: str | None = None

    def parse(
        self, name: str, raw: str, default: Any, earlier: Mapping[str, Any]
    ) -> dict[str, Any]:
        try:
            given = json.loads(raw)
        except ValueError as exc:
            raise ConfigError(f"{name} is not JSON: {exc}") from exc
        caps = earlier[self.caps] if self.caps else HARD_CAPS
        try:
            return effective_limits(given, default, caps)
        except PlanError as exc:
            raise ConfigError(f"{name}: {exc}") from exc


def setting(
    variable: str,
    default: T,
    how: How | None = None,
    *,
    flat: str | None = None,
    factory: Callable[[], T] | None = None,
    secret: bool = False,
) -> T:
    """A field read from `variable`; `default` when the variable is unset (or empty);
    `secret`: left out of the repr."""
    metadata = {_ENV: variable, _HOW: how or How(), _FLAT: flat}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata, repr=not secret)
    return field(default=default, metadata=metadata, repr=not secret)


def plain(default: T, *, flat: str | None = None, factory: Callable[[], T] | None = None) -> T:
    """A field no variable sets (a command-line flag, a constant kept beside its section)."""
    if factory is not None:
        return field(default_factory=factory, metadata={_FLAT: flat})
    return field(default=default, metadata={_FLAT: flat})


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
    queue_poll_s: float = setting("A2A_AGENT_QUEUE_POLL_S", 0.5, Seconds())
    reconcile_interval_s: float = setting("A2A_AGENT_RECONCILE_INTERVAL_S", 10.0, Seconds())
    heartbeat_timeout_s: float = setting("A2A_AGENT_HEARTBEAT_TIMEOUT_S", 30.0, Seconds())
    shutdown_grace_s: float = setting("A2A_AGENT_SHUTDOWN_GRACE_S", 30.0, Seconds())
    stuck_after_s: float = setting("A2A_AGENT_STUCK_AFTER_S", 3600.0, Seconds())
    max_run_age_s: float = setting("A2A_AGENT_MAX_RUN_AGE_S", 7 * DAY, Seconds())


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


@dataclass(frozen=True)
class Settings:
    """Everything the service reads from its environment, read once at start-up."""

    # RUF009: `setting` is a field specifier (dataclasses.field with the variable beside it).
    home: Path = setting("A2A_AGENT_HOME", Path("./.a2a-agent"), AsPath())  # noqa: RUF009
    # Tests only: a file naming where to fail on purpose (a2a_agent/watched.py).
    fault_file: Path | None = setting("A2A_AGENT_FAULT_FILE", None, AsPath())  # noqa: RUF009
    server: ServerSettings = field(default_factory=ServerSettings)
    database: DatabaseSettings = field(default_factory=DatabaseSettings)
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    intake: IntakeSettings = field(default_factory=IntakeSettings)
    commands: CommandSettings = field(default_factory=CommandSettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    push: PushSettings = field(default_factory=PushSettings)
    peers: PeerSettings = field(default_factory=PeerSettings)
    retention: RetentionSettings = field(default_factory=RetentionSettings)
    logging: LogSettings = field(default_factory=LogSettings)

    @property
    def workspaces(self) -> Path:
        return self.home / "workspaces"

    # Transitional flat reads, for tests/support/here.py (not ours to edit in this change);
    # new code reads settings.database.url and settings.server.http.
    @property
    def database_url(self) -> str | None:
        return self.database.url

    @property
    def http(self) -> str:
        return self.server.http

    def with_overrides(self, **changes: object) -> Settings:
        """A copy with some fields changed, each named as in the flat Settings before
        sections (`host`, `port`, `run_worker`, `push_delivery`, `executor_id`, ...); a whole
        section: `dataclasses.replace(settings, server=...)`."""
        top: dict[str, Any] = {}
        sections: dict[str, dict[str, object]] = {}
        for flat, value in changes.items():
            if flat in ("home", "fault_file"):
                top[flat] = value
            elif flat in FLAT_NAMES:
                section, name = FLAT_NAMES[flat]
                sections.setdefault(section, {})[name] = value
            else:
                raise TypeError(f"no setting named {flat!r}")
        for section, values in sections.items():
            top[section] = replace(getattr(self, section), **values)
        return replace(self, **top)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, *, role: str = "serve") -> Settings:
        env = os.environ if env is None else env
        read = {name: read_section(section, env) for name, section in SECTIONS.items()}
        worker = cast(WorkerSettings, read["worker"])
        if not worker.executor_id:
            read["worker"] = replace(worker, executor_id=f"{socket.gethostname()}-{role}")
        read["commands"] = replace(
            read["commands"],
            env={name: env[name] for name in COMMAND_PASSTHROUGH if name in env},
        )
        own = read_section(cls, env)
        return cls(home=own["home"].resolve(), fault_file=own["fault_file"], **read)


def read_section(section: type[Any], env: Mapping[str, str]) -> Any:
    """The section's fields read from `env`, each variable unset (or empty) its default.
    For Settings itself: a dict of its own fields read (its sections are read apart)."""
    values: dict[str, Any] = {}
    for f in fields(section):
        if _ENV not in f.metadata:
            continue
        how: How = f.metadata[_HOW]
        raw = env.get(f.metadata[_ENV])
        if raw is None or (raw == "" and how.empty_is_unset):
            continue
        values[f.name] = how.parse(
            f.metadata[_ENV], raw, default(f), {**defaults(section), **values}
        )
    if section is Settings:
        return {**defaults(section), **values}
    return section(**values)


def defaults(section: type[Any]) -> dict[str, Any]:
    """A section's fields, as the dataclass makes them when given nothing."""
    return {f.name: default(f) for f in fields(section) if _ENV in f.metadata}


def default(f: Field[Any]) -> Any:
    if callable(f.default_factory):
        return f.default_factory()
    return f.default


@dataclass(frozen=True)
class Variable:
    """One row of the table: a variable, the field it sets, its default, how it reads."""

    name: str
    section: str | None  # None: a field of Settings itself
    field: str
    default: Any
    how: How


def variables() -> Iterator[Variable]:
    """Every variable Settings reads, in declaration order (docs/settings.md lists them)."""
    for section_name, section in [(None, Settings), *SECTIONS.items()]:
        for f in fields(section):
            if _ENV in f.metadata:
                yield Variable(f.metadata[_ENV], section_name, f.name, default(f), f.metadata[_HOW])


def _flat_names() -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = {}
    for section_name, section in SECTIONS.items():
        for f in fields(section):
            flat = f.metadata.get(_FLAT) or f.name
            if flat in names or flat in ("home", "fault_file"):
                raise AssertionError(f"two settings are named {flat!r}")
            names[flat] = (section_name, f.name)
    return names


# Flat name (as before sections) -> (section, field): with_overrides takes these.
FLAT_NAMES = _flat_names()
