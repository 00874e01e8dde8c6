"""Caller-given plans: parse and validate a plan DataPart into items the store can keep."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a_agent.errors import PlanError
from a2a_agent.whole_numbers import EXACT
from a2a_agent.wire import wire_name
from persistence.records import NewItem

ITEM_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The scopes of the run's own idempotency keys (harness/keys.py): an item of that name would
# share their keys.
RESERVED_IDS = frozenset({"plan", "task"})
ITEM_KEYS = frozenset(
    {
        "id",
        "title",
        "run",
        "verify",
        "max_attempts",
        "timeout_s",
        "irreversible",
        "ask",
        "facts",
        "precheck",
        "delegate_to",
    }
)
DELEGATE_KEYS = frozenset({"peer", "plan"})
FACT_KEYS = frozenset({"key", "check", "max_age_s"})
MAX_FACTS = 20
COMMAND_KEYS = frozenset({"command", "timeout_s"})
# An item's verify may also say its check only reads the workspace, so re-verification may run
# it beside other such checks.
VERIFY_KEYS = COMMAND_KEYS | {"independent"}
PLAN_KEYS = frozenset({"goal", "items", "policy", "verify"})
MAX_GOAL_CHARS = 10_000
MAX_TITLE_CHARS = 500
MAX_ASK_CHARS = 10_000
# A command is one argument of `bash -c`: Linux takes at most 128 KiB in one (MAX_ARG_STRLEN),
# and 30,000 characters are at most 120,000 bytes of UTF-8.
MAX_COMMAND_CHARS = 30_000
# A title is one line (progress.md, the CLI, the dashboard): no control characters.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
POLICY_KEYS = frozenset(
    {
        "review_plan",
        "on_item_failure",
        "approval_expires_s",
        "on_expiry",
        "budget_pause",
        "on_weak_check",
        "on_regression",
        "reverify_every",
        "approve_publish",
    }
)
ON_ITEM_FAILURE = ("stop", "ask", "skip")
ON_WEAK_CHECK = ("warn", "ask", "refuse")  # a verify command that passes before the work
ON_EXPIRY = ("reject", "approve")
# A done item whose check fails when re-verified: work it again, ask a person, or fail.
ON_REGRESSION = ("reopen", "ask", "fail")
MAX_EXPIRES_S = 90 * 24 * 3600
MAX_ATTEMPTS_CAP = 20


@dataclass(frozen=True)
class PlanLimits:
    max_items: int
    default_max_attempts: int
    default_verify_timeout_s: int
    max_verify_timeout_s: int  # also the most a `run` command may ask for
    max_item_timeout_s: int = 7 * 24 * 3600
    peers: frozenset[str] = frozenset()  # the peer agents an item may be delegated to


@dataclass(frozen=True)
class ParsedPlan:
    goal: str
    items: list[NewItem]
    policy: dict[str, Any] | None = None
    # The plan's own check, after its last item: {"command", "timeout_s"}; completion needs it.
    acceptance: dict[str, Any] | None = None

    @property
    def items_needing_model(self) -> list[str]:
        return [
            i.item_id
            for i in self.items
            if i.run is None and i.ask is None and i.delegate_to is None
        ]


def shown(value: Any) -> str:
    """A caller's value as an error message quotes it: short, and in JSON's words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) <= EXACT:
        return str(int(value))
    if isinstance(value, int) and len(str(abs(value))) > 20:
        return f"{value:.6g}"  # a 300-digit integer is said as 1e+308, not spelled out
    if isinstance(value, int | float):
        return repr(value)  # a float beyond 2**53 as Python writes it: 1e+308
    if isinstance(value, str):
        quoted = repr(value if len(value) <= 60 else value[:57] + "...")
        return f"the string {quoted}"
    if isinstance(value, Mapping):
        return "an object" if value else "an empty object"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return type(value).__name__


def whole_number(value: Any, where: str, *, low: int, high: int, unit: str = "") -> int:
    """A whole number in [low, high]. DataPart numbers arrive as floats (protobuf Value), so 2
    comes as 2.0 (taken) and a boolean is not a number, though Python's bool is an int."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and (isinstance(value, int) or (math.isfinite(value) and value.is_integer()))
        and low <= value <= high
    )
    if not ok:
        of = f" of {unit}" if unit else ""
        raise PlanError(
            f"{where} must be a whole number{of} between {low} and {high}; got {shown(value)}"
        )
    return int(value)


def _command(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise PlanError(f"{where} must be a string (a shell command); got {shown(value)}")
    if not value.strip():
        raise PlanError(f"{where} must not be empty")
    if len(value) > MAX_COMMAND_CHARS:
        raise PlanError(
            f"{where} has {len(value)} characters; at most {MAX_COMMAND_CHARS} (put a longer "
            "script in a file the plan's work writes, or in the workspace you send)"
        )
    return value


def _command_spec(
    value: Any,
    where: str,
    default_timeout: int | None,
    max_timeout: int,
    allowed: frozenset[str] = COMMAND_KEYS,
) -> tuple[str, int | None]:
    """A command given as a string, or as {"command", "timeout_s"}; its timeout is capped by
    the server's setting."""
    if isinstance(value, Mapping):
        _unknown(value.keys(), allowed, where)
        timeout = default_timeout
        if "timeout_s" in value:
            timeout = whole_number(
                value["timeout_s"], f"{where}.timeoutS", low=1, high=max_timeout, unit="seconds"
            )
        return _command(value.get("command"), f"{where}.command"), timeout
    return _command(value, where), default_timeout


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise PlanError(f"{where} must be true or false; got {shown(value)}")
    return value


def _one_of(value: Any, where: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise PlanError(f"{where} must be one of {list(allowed)}; got {shown(value)}")
    return str(value)


def parse_policy(data: Any) -> dict[str, Any]:
    """What the run does at its checkpoints: {reviewPlan, onItemFailure, approvalExpiresS,
    onExpiry, budgetPause, onWeakCheck, onRegression, reverifyEvery}. Raises PlanError naming
    the problem."""
    if not isinstance(data, Mapping):
        raise PlanError(f"policy must be an object; got {shown(data)}")
    _unknown(data.keys(), POLICY_KEYS, "policy")
    policy: dict[str, Any] = {}
    if "review_plan" in data:
        policy["review_plan"] = _flag(data["review_plan"], "policy.reviewPlan")
    if "approve_publish" in data:
        policy["approve_publish"] = _flag(data["approve_publish"], "policy.approvePublish")
    if "budget_pause" in data:
        policy["budget_pause"] = _flag(data["budget_pause"], "policy.budgetPause")
    if "on_item_failure" in data:
        policy["on_item_failure"] = _one_of(
            data["on_item_failure"], "policy.onItemFailure", ON_ITEM_FAILURE
        )
    if "on_expiry" in data:
        policy["on_expiry"] = _one_of(data["on_expiry"], "policy.onExpiry", ON_EXPIRY)
    if "on_weak_check" in data:
        policy["on_weak_check"] = _one_of(
            data["on_weak_check"], "policy.onWeakCheck", ON_WEAK_CHECK
        )
    if "on_regression" in data:
        policy["on_regression"] = _one_of(
            data["on_regression"], "policy.onRegression", ON_REGRESSION
        )
    if "reverify_every" in data:
        policy["reverify_every"] = whole_number(
            data["reverify_every"], "policy.reverifyEvery", low=1, high=10_000, unit="items"
        )
    if "approval_expires_s" in data:
        policy["approval_expires_s"] = whole_number(
            data["approval_expires_s"],
            "policy.approvalExpiresS",
            low=1,
            high=MAX_EXPIRES_S,
            unit="seconds",
        )
    return policy


def parse_facts(value: Any, where: str) -> list[dict[str, Any]]:
    """The facts an item establishes: [{key, check, maxAgeS}]; the check's output is the value."""
    if not isinstance(value, list) or len(value) > MAX_FACTS:
        raise PlanError(f"{where} must be a list of at most {MAX_FACTS} facts; got {shown(value)}")
    facts: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(value):
        here = f"{where}[{n}]"
        if not isinstance(raw, Mapping):
            raise PlanError(f'{here} must be an object {{"key", "check", "maxAgeS"}}')
        _unknown(raw.keys(), FACT_KEYS, here)
        key = raw.get("key")
        if not isinstance(key, str) or not ITEM_ID.fullmatch(key):
            raise PlanError(
                f"{here}.key must be a name of letters, digits, '.', '_' or '-' (at most 64, "
                f"starting with a letter or digit); got {shown(key)}"
            )
        if key in seen:
            # One item records its facts in one statement: a key twice would be two values.
            raise PlanError(
                f"{here}.key {key!r} appears twice (also {where}[{seen[key]}].key); an item's "
                "fact keys must be unique"
            )
        seen[key] = n
        facts.append(
            {
                "key": key,
                "check": _command(raw.get("check"), f"{here}.check"),
                "max_age_s": whole_number(
                    raw.get("max_age_s", 3600),
                    f"{here}.maxAgeS",
                    low=1,
                    high=MAX_EXPIRES_S,
                    unit="seconds",
                ),
            }
        )
    return facts


def _delegate_to(value: Any, where: str, peers: frozenset[str]) -> dict[str, Any]:
    """`delegate_to`: a peer's name, or {"peer", "plan"} (the plan the peer is sent; the peer
    checks it). The item's own verify command still decides, after the peer's work is in."""
    spec = {"peer": value} if isinstance(value, str) else value
    if not isinstance(spec, Mapping):
        raise PlanError(f'{where} must be a peer\'s name or {{"peer", "plan"}}; got {shown(value)}')
    _unknown(spec.keys(), DELEGATE_KEYS, where)
    peer = spec.get("peer")
    if not isinstance(peer, str) or peer not in peers:
        known = ", ".join(sorted(peers)) or "none are configured (A2A_AGENT_PEERS)"
        name = repr(peer) if isinstance(peer, str) else shown(peer)
        raise PlanError(f"{where} names no known peer ({name}); peers: {known}")
    plan = spec.get("plan")
    if plan is not None and (
        not isinstance(plan, Mapping) or not plan.get("goal") or not plan.get("items")
    ):
        raise PlanError(f"{where}.plan must be a plan with a goal and items")
    return {"peer": peer, **({"plan": dict(plan)} if plan is not None else {})}


def _unknown(keys: Any, allowed: frozenset[str], where: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        names = sorted(wire_name(name) for name in allowed)
        raise PlanError(f"{where} has unknown field(s) {extra}; allowed: {names}")


def _text(value: Any, where: str, limit: int, *, one_line: bool = False) -> str:
    """A string with something in it, at most `limit` characters (and, for a line, no control
    characters)."""
    if not isinstance(value, str) or not value.strip():
        raise PlanError(f"{where} must be a non-empty string; got {shown(value)}")
    if len(value) > limit:
        raise PlanError(f"{where} has {len(value)} characters; at most {limit}")
    if one_line and CONTROL.search(value):
        raise PlanError(
            f"{where} must be one line of text without control characters; got {shown(value)}"
        )
    return value


def parse_plan(data: Any, limits: PlanLimits, *, root: str = "plan") -> ParsedPlan:
    """Validate the value of a `{"plan": ...}` DataPart. Raises PlanError naming the field
    (`plan.items[1].verify.timeoutS`) and what it got."""
    if not isinstance(data, Mapping):
        raise PlanError(f'"{root}" must be an object with "goal" and "items"; got {shown(data)}')
    _unknown(data.keys(), PLAN_KEYS, root)
    goal = data.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise PlanError(
            f"{root}.goal must be a non-empty string saying what the plan achieves; "
            f"got {shown(goal)}"
        )
    if len(goal) > MAX_GOAL_CHARS:
        raise PlanError(
            f"{root}.goal has {len(goal)} characters; at most {MAX_GOAL_CHARS} (say the details "
            "in the items)"
        )
    raw_items = data.get("items")
    if not isinstance(raw_items, list) or not raw_items:
        raise PlanError(
            f"{root}.items must be a non-empty list; a plan without items has nothing to do "
            f"(got {shown(raw_items)})"
        )
    if len(raw_items) > limits.max_items:
        raise PlanError(f"{root}.items has {len(raw_items)} items; the limit is {limits.max_items}")
    items: list[NewItem] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(raw_items):
        items.append(_item(raw, f"{root}.items[{n}]", limits, seen))
        seen[items[-1].item_id] = n
    policy = parse_policy(data["policy"]) if "policy" in data else None
    acceptance = None
    if data.get("verify") is not None:
        command, timeout = _command_spec(
            data["verify"],
            f"{root}.verify",
            limits.default_verify_timeout_s,
            limits.max_verify_timeout_s,
        )
        acceptance = {"command": command, "timeout_s": timeout or limits.default_verify_timeout_s}
    return ParsedPlan(goal=goal, items=items, policy=policy, acceptance=acceptance)


def _item(raw: Any, where: str, limits: PlanLimits, seen: Mapping[str, int]) -> NewItem:
    if not isinstance(raw, Mapping):
        raise PlanError(f"{where} must be an object; got {shown(raw)}")
    _unknown(raw.keys(), ITEM_KEYS, where)
    item_id = raw.get("id")
    if not isinstance(item_id, str) or not ITEM_ID.fullmatch(item_id):
        raise PlanError(
            f"{where}.id must be a string of letters, digits, '.', '_' or '-' "
            f"(at most 64, starting with a letter or digit); got {shown(item_id)}"
        )
    if item_id in RESERVED_IDS:
        raise PlanError(
            f"{where}.id {item_id!r} is reserved (the run's own steps are keyed by it); "
            "name the item otherwise"
        )
    if item_id in seen:
        first = where.rsplit("[", 1)[0] + f"[{seen[item_id]}]"
        raise PlanError(
            f"{where}.id: item id {item_id!r} appears twice (also {first}.id); item ids must "
            "be unique"
        )
    title = _text(raw.get("title", item_id), f"{where}.title", MAX_TITLE_CHARS, one_line=True)
    run, run_timeout = None, None
    if raw.get("run") is not None:
        run, run_timeout = _command_spec(
            raw["run"], f"{where}.run", None, limits.max_verify_timeout_s
        )
    ask = raw.get("ask")
    if ask is not None:
        ask = _text(ask, f"{where}.ask", MAX_ASK_CHARS)
        if run is not None:
            raise PlanError(f"{where}: an item that asks a person has no run command")
    delegate_to = None
    if raw.get("delegate_to") is not None:
        delegate_to = _delegate_to(raw["delegate_to"], f"{where}.delegateTo", limits.peers)
        if run is not None or ask is not None:
            raise PlanError(
                f"{where}: an item delegated to a peer has no run command and asks nothing"
            )
    irreversible = _flag(raw.get("irreversible", False), f"{where}.irreversible")
    precheck = _flag(raw.get("precheck", True), f"{where}.precheck")
    given = raw
    if "verify" not in raw and ask is not None:
        # The answer is written to answers/<id>.md: by default the item is done once it is.
        given = {**raw, "verify": f"test -s answers/{item_id}.md"}
    if "verify" not in given:
        raise PlanError(
            f"{where} has no verify command; every item needs one, and its exit code 0 "
            "is what marks the item done"
        )
    command, timeout = _command_spec(
        given["verify"],
        f"{where}.verify",
        limits.default_verify_timeout_s,
        limits.max_verify_timeout_s,
        VERIFY_KEYS,
    )
    independent = isinstance(given["verify"], Mapping) and _flag(
        given["verify"].get("independent", False), f"{where}.verify.independent"
    )
    item_timeout = None
    if "timeout_s" in raw:
        item_timeout = whole_number(
            raw["timeout_s"],
            f"{where}.timeoutS",
            low=1,
            high=limits.max_item_timeout_s,
            unit="seconds",
        )
    attempts = limits.default_max_attempts
    if "max_attempts" in raw:
        attempts = whole_number(
            raw["max_attempts"], f"{where}.maxAttempts", low=1, high=MAX_ATTEMPTS_CAP
        )
    return NewItem(
        item_id=item_id,
        title=title,
        run=run,
        verify_command=command,
        verify_timeout_s=timeout or limits.default_verify_timeout_s,
        max_attempts=attempts,
        run_timeout_s=run_timeout,
        timeout_s=item_timeout,
        irreversible=irreversible,
        ask=ask,
        precheck=precheck,
        verify_independent=independent,
        delegate_to=delegate_to,
        facts=parse_facts(raw["facts"], f"{where}.facts") if "facts" in raw else [],
    )
