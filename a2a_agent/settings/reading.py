"""How a setting is declared and read: `setting(VARIABLE, default, how)` beside a field, the
`How` of each kind of value (`Whole`, `Seconds`, `Choice`, ...), and the reading of a section."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from a2a_agent.budget import HARD_CAPS, effective_limits
from a2a_agent.errors import ConfigError, PlanError

T = TypeVar("T")

# The keys of a field's metadata, private to this package (service.py lists the table by them).
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


def read_section(section: type[Any], env: Mapping[str, str]) -> Any:
    """The section's fields read from `env`, each variable unset (or empty) its default."""
    return section(**read_fields(section, env))


def read_fields(section: type[Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The fields of `section` whose variables `env` sets (and not empty), each read; the
    others are left out, for the dataclass's defaults."""
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
    return values


def defaults(section: type[Any]) -> dict[str, Any]:
    """A section's fields, as the dataclass makes them when given nothing."""
    return {f.name: default(f) for f in fields(section) if _ENV in f.metadata}


def default(f: Field[Any]) -> Any:
    if callable(f.default_factory):
        return f.default_factory()
    return f.default
