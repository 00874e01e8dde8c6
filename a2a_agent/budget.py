"""Budgets that belong to the run: limits per task, checked before every call, from a ledger.

Dimensions: money (USD, priced per model), tokens, wall-clock time since submission, steps
without progress (no item finished), and actions (model tool calls) per tool and in total.
The ledger is `budget_charges`; what is used is its sum, so it is the same on every worker and
after every restart. The model never sees or argues with any of this.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a_agent.errors import AgentError, ConfigError, PlanError
from a2a_agent.model.types import Usage
from a2a_agent.plans import shown
from a2a_agent.wire import wire_name
from persistence.budgets import Budgets

NUMERIC_LIMITS = ("max_usd", "max_tokens", "max_wall_s", "max_steps_without_progress")
LIMIT_KEYS = frozenset({*NUMERIC_LIMITS, "max_actions"})
# maxActions is keyed by tool name ("*" for all tools): a model's tool names are letters,
# digits, "_" and "-", at most 64.
TOOL_NAME = re.compile(r"^(\*|[A-Za-z0-9_-]{1,64})$")
MAX_TOOL_LIMITS = 64
ALERT_PCT = 50

DEFAULT_LIMITS: dict[str, Any] = {
    "max_usd": 25.0,
    "max_tokens": 20_000_000,
    "max_wall_s": 24 * 3600,
    "max_steps_without_progress": 300,
    "max_actions": {"*": 3000},
}
HARD_CAPS: dict[str, Any] = {
    "max_usd": 250.0,
    "max_tokens": 200_000_000,
    "max_wall_s": 14 * 24 * 3600,
    "max_steps_without_progress": 5000,
    "max_actions": {"*": 50_000},
}


@dataclass(frozen=True)
class Prices:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000


DEFAULT_PRICES = {"*": Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)}


def parse_prices(raw: str | None) -> dict[str, Prices]:
    """A2A_AGENT_PRICES: {"model": {"input", "output", "cache_read", "cache_write"}}; "*" is
    the price of any other model."""
    if not raw:
        return dict(DEFAULT_PRICES)
    try:
        table = json.loads(raw)
        prices = {str(m): Prices(**{k: float(v) for k, v in p.items()}) for m, p in table.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"A2A_AGENT_PRICES is not a price table: {exc}") from exc
    return {**DEFAULT_PRICES, **prices}


def price_for(prices: Mapping[str, Prices], model: str) -> Prices:
    return prices.get(model) or prices["*"]


def _positive(value: Any, where: str, *, whole: bool) -> float:
    """A limit: a finite number more than 0 (and whole, but for money). A DataPart's numbers
    arrive as floats, so 5 comes as 5.0; a boolean is not a number, though Python's bool is
    an int."""
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PlanError(f"{where} must be {kind} more than 0; got {shown(value)}")
    if value <= 0:
        raise PlanError(f"{where} must be {kind} more than 0; got {shown(value)}")
    if whole and not float(value).is_integer():
        raise PlanError(f"{where} must be a whole number; got {shown(value)}")
    return float(value)


def _check_limits(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise PlanError(f"{where} must be an object; got {shown(raw)}")
    unknown = sorted(set(raw) - LIMIT_KEYS)
    if unknown:
        allowed = sorted(wire_name(key) for key in LIMIT_KEYS)
        raise PlanError(f"{where} has unknown field(s) {unknown}; allowed: {allowed}")
    limits: dict[str, Any] = {}
    for key in NUMERIC_LIMITS:
        if key in raw:
            number = _positive(raw[key], f"{where}.{wire_name(key)}", whole=key != "max_usd")
            limits[key] = number if key == "max_usd" else int(number)
    if "max_actions" in raw:
        actions = raw["max_actions"]
        if not isinstance(actions, Mapping) or not actions:
            raise PlanError(
                f'{where}.maxActions must be an object like {{"bash": 200, "*": 1000}}; '
                f"got {shown(actions)}"
            )
        if len(actions) > MAX_TOOL_LIMITS:
            raise PlanError(
                f"{where}.maxActions names {len(actions)} tools; at most {MAX_TOOL_LIMITS}"
            )
        limits["max_actions"] = {}
        for tool, n in actions.items():
            if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
                raise PlanError(
                    f"{where}.maxActions has a key that is not a tool name ({shown(tool)}): "
                    'a tool\'s name is letters, digits, "_" and "-" (at most 64), or "*" for '
                    "all tools"
                )
            limits["max_actions"][tool] = int(
                _positive(n, f"{where}.maxActions.{tool}", whole=True)
            )
    return limits


def effective_limits(
    requested: Any, defaults: Mapping[str, Any], caps: Mapping[str, Any]
) -> dict[str, Any]:
    """The caller's limits (validated, each at most the server's cap) over the defaults."""
    asked = _check_limits(requested, "budget") if requested is not None else {}
    for key, value in asked.items():
        if key == "max_actions":
            for tool, n in value.items():
                cap = caps.get("max_actions", {}).get(tool, caps.get("max_actions", {}).get("*"))
                if cap is not None and n > cap:
                    raise PlanError(
                        f"budget.maxActions.{tool} is {n}, above this server's cap of {cap}"
                    )
        elif key in caps and value > caps[key]:
            raise PlanError(
                f"budget.{wire_name(key)} is {value}, above this server's cap of {caps[key]}"
            )
    limits = {**defaults, **asked}
    limits["max_actions"] = {**defaults.get("max_actions", {}), **asked.get("max_actions", {})}
    return limits


@dataclass(frozen=True)
class Exhausted:
    """A dimension the next step may not spend in. `used` is what was spent; `reserved` what
    the step would need on top (a model call's maximum cost), when that is what crossed."""

    dimension: str
    used: float
    limit: float
    reserved: float = 0.0

    @property
    def reason(self) -> str:
        if self.reserved and self.used < self.limit:
            return (
                f"budget_exhausted: {self.dimension}: the next model call needs up to "
                f"{self.reserved:g} (reserved for its input and the fewest output tokens it "
                f"may have) and {self.used:g} of the limit {self.limit:g} is used"
            )
        return f"budget_exhausted: {self.dimension} used {self.used:g} of its limit {self.limit:g}"


@dataclass(frozen=True)
class Crossing:
    dimension: str
    threshold: int
    used: float
    limit: float


def _used_limit(status: Mapping[str, Any], dimension: str) -> tuple[float, float | None]:
    entry = status.get(dimension) or {}
    limit = entry.get("limit")
    return float(entry.get("used") or 0), (float(limit) if limit is not None else None)


def crossings(status: Mapping[str, Any], pause_pct: int) -> list[Crossing]:
    """Every (dimension, threshold) the run has reached: 50 % alerts and the pause point."""
    found = []
    for dimension in ("usd", "tokens", "wall_s", "steps_without_progress", "actions"):
        used, limit = _used_limit(status, dimension)
        if not limit:
            continue
        for threshold in sorted({ALERT_PCT, pause_pct}):
            if used * 100 >= threshold * limit:
                found.append(Crossing(dimension, threshold, used, limit))
    return found


def exhausted(
    status: Mapping[str, Any],
    *,
    tokens: float = 0,
    usd: float = 0,
    tool: str | None = None,
) -> Exhausted | None:
    """Whether the next step may run: `tokens`/`usd` are what it reserves, `tool` its action."""
    for dimension, extra in (("usd", usd), ("tokens", tokens)):
        used, limit = _used_limit(status, dimension)
        if limit is not None and (used + extra > limit or used >= limit):
            return Exhausted(dimension, round(used, 6), limit, round(extra, 6))
    for dimension in ("wall_s", "steps_without_progress"):
        used, limit = _used_limit(status, dimension)
        if limit is not None and used >= limit:
            return Exhausted(dimension, used, limit)
    if tool is not None:
        used, limit = _used_limit(status, "actions")
        if limit is not None and used + 1 > limit:
            return Exhausted("actions", used + 1, limit)
        per_tool = (status.get("actions_by_tool") or {}).get(tool) or {}
        tool_limit = ((status.get("limits") or {}).get("max_actions") or {}).get(tool)
        tool_used = float(per_tool.get("used") or 0)
        if tool_limit is not None and tool_used + 1 > float(tool_limit):
            return Exhausted(f"actions.{tool}", tool_used + 1, float(tool_limit))
    return None


@dataclass(frozen=True)
class Spend:
    """What a step may spend, checked before it runs: a model call's maximum cost, or one
    action of a tool."""

    tokens: float = 0
    usd: float = 0
    tool: str | None = None


class BudgetStop(AgentError):
    """A step may not run: the run's budget is exhausted in one dimension."""

    def __init__(self, spent: Exhausted) -> None:
        super().__init__(spent.reason)
        self.spent = spent


def alert_text(crossing: Crossing, pause_pct: int) -> str:
    figures = f"{crossing.used:g} of {crossing.limit:g}"
    if crossing.threshold == pause_pct:
        return (
            f"Budget: {pause_pct}% of {crossing.dimension} used ({figures}): the pause point. "
            "A run whose policy has budgetPause (the default) waits here for approval before "
            "it spends more money, tokens or actions."
        )
    return f"Budget alert: {crossing.threshold}% of {crossing.dimension} used ({figures})."


class BudgetGuard:
    """Checked by the harness before every step that spends; the model cannot see or move it."""

    def __init__(self, budgets: Budgets, *, pause_pct: int, prices: Mapping[str, Prices]) -> None:
        self.budgets = budgets
        self.pause_pct = pause_pct
        self.prices = prices

    async def check(self, task_id: str, status: Mapping[str, Any], spend: Spend) -> None:
        """Record new threshold crossings in `status` (once each); raise BudgetStop if a step
        spending `spend` may not run."""
        seen = set(status.get("alerts") or [])
        new = [
            c
            for c in crossings(status, self.pause_pct)
            if f"{c.dimension}:{c.threshold}" not in seen
        ]
        if new:
            await self.budgets.record_alerts(
                task_id, [(c.dimension, c.threshold, alert_text(c, self.pause_pct)) for c in new]
            )
        spent = exhausted(status, tokens=spend.tokens, usd=spend.usd, tool=spend.tool)
        if spent is not None:
            raise BudgetStop(spent)

    def cost(self, model: str, usage: Usage) -> float:
        return price_for(self.prices, model).cost(usage)

    def output_room(
        self, status: Mapping[str, Any], model: str, input_tokens: int
    ) -> tuple[float, str] | None:
        """How many output tokens a call with `input_tokens` can still pay for, and the
        dimension that sets it; None when no limit does."""
        room: tuple[float, str] | None = None
        price = price_for(self.prices, model)
        used, limit = _used_limit(status, "usd")
        if limit is not None and price.output > 0:
            left = limit - used - input_tokens * price.input / 1_000_000
            room = (left * 1_000_000 / price.output, "usd")
        used, limit = _used_limit(status, "tokens")
        if limit is not None:
            left_tokens = limit - used - input_tokens
            if room is None or left_tokens < room[0]:
                room = (left_tokens, "tokens")
        return room

    def reservation(self, model: str, input_tokens: int, max_tokens: int) -> tuple[int, float]:
        """The most a call can cost: its input and every output token it may write."""
        usage = Usage(input_tokens=input_tokens, output_tokens=max_tokens)
        return input_tokens + max_tokens, self.cost(model, usage)
