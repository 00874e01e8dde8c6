"""Plan validation: numbers from DataParts, defaults, and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from a2a_agent.errors import PlanError
from a2a_agent.plans import PlanLimits, parse_plan

LIMITS = PlanLimits(
    max_items=3, default_max_attempts=2, default_verify_timeout_s=60, max_verify_timeout_s=600
)


def plan(*items: dict[str, Any]) -> dict[str, Any]:
    return {"goal": "g", "items": list(items)}


def test_defaults_and_float_numbers() -> None:
    parsed = parse_plan(
        plan(
            {"id": "a", "run": "make", "verify": "make check"},
            {
                "id": "b",
                "title": "B",
                "verify": {"command": "true", "timeout_s": 30.0},
                "max_attempts": 3.0,
            },
        ),
        LIMITS,
    )
    a, b = parsed.items
    assert (a.title, a.max_attempts, a.verify_timeout_s, a.run) == ("a", 2, 60, "make")
    assert (b.max_attempts, b.verify_timeout_s, b.run) == (3, 30, None)
    assert parsed.items_needing_model == ["b"]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"id": f"i{n}", "verify": "true"} for n in range(4)], "the limit is 3"),
        ([{"id": "a", "verify": {"command": "x", "timeout_s": 601}}], "between 1 and 600"),
        ([{"id": "a", "verify": "  "}], "must not be empty"),
        ([{"id": "a", "verify": "true", "max_attempts": True}], "whole number"),
        ([{"id": "a", "verify": "true", "title": ""}], "title"),
        (["not an object"], "must be an object"),
        ([{"id": "plan", "verify": "true"}], "'plan' is reserved"),
        ([{"id": "task", "verify": "true"}], "'task' is reserved"),
    ],
)
def test_refusals(items: list[Any], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        parse_plan({"goal": "g", "items": items}, LIMITS)


def test_a_huge_number_is_said_short_with_the_limit() -> None:
    # 1e308 is a whole float: spelled out as an integer it was 309 digits.
    item = {"id": "a", "verify": "true", "timeout_s": 1e308}
    with pytest.raises(PlanError) as refused:
        parse_plan(plan(item), LIMITS)
    said = str(refused.value)
    assert said.endswith("between 1 and 604800; got 1e+308"), said
    assert len(said) < 150


def test_an_empty_list_is_said_empty() -> None:
    with pytest.raises(PlanError, match=r"must be a non-empty list; .*\(got an empty list\)$"):
        parse_plan({"goal": "g", "items": []}, LIMITS)


def test_unknown_plan_field() -> None:
    with pytest.raises(PlanError, match="unknown field"):
        parse_plan({"goal": "g", "items": [{"id": "a", "verify": "true"}], "steps": []}, LIMITS)
