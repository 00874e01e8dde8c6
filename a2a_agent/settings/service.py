"""`Settings`: the whole of what the service reads at start-up, its sections together; the
table of every variable it reads (docs/settings.md lists it); the constants beside them."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

from a2a_agent.settings.reading import (
    _ENV,
    _FLAT,
    _HOW,
    AsPath,
    How,
    default,
    defaults,
    read_fields,
    read_section,
    setting,
)
from a2a_agent.settings.sections import (
    SECTIONS,
    BudgetSettings,
    CommandSettings,
    DatabaseSettings,
    IntakeSettings,
    LogSettings,
    ModelSettings,
    PeerSettings,
    PolicySettings,
    PushSettings,
    RetentionSettings,
    ServerSettings,
    WorkerSettings,
)

# Bumped by hand only when the step sequence of a workflow changes in a way DBOS patching
# cannot express; every in-flight run is recovered only by a process with the same version.
# 2: typed step results (issue 8); 3: workflow segments and the steps around pauses (issue 10).
APPLICATION_VERSION = "a2a-agent-3"

# Commands the harness runs see a small, predictable environment, never our secrets.
COMMAND_PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")


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
        own = {**defaults(cls), **read_fields(cls, env)}  # its sections are read apart
        return cls(home=own["home"].resolve(), fault_file=own["fault_file"], **read)


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
