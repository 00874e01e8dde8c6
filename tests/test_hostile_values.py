"""Values the plan, budget, workspace and publish schemas take but the service cannot use are
refused with the field named, over JSON-RPC and REST, in A2A 1.0 and 0.3, and nothing is stored.

Numbers JSON cannot carry (NaN, Infinity, 1e999, an integer of 400 digits) are refused at the
door, before the SDK parses the body (`edge/json_checks.py`); every other hostile value by the
plan's and budget's own parsing, which a property test here holds to the served JSON Schemas.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from a2a_agent.budget import DEFAULT_LIMITS, HARD_CAPS, effective_limits
from a2a_agent.edge.json_checks import nonfinite, nonfinite_message, nonfinite_path
from a2a_agent.edge.schemas import budget_schema, plan_schema
from a2a_agent.errors import PlanError
from a2a_agent.plans import ITEM_ID, MAX_COMMAND_CHARS, PlanLimits, parse_plan
from a2a_agent.wire import from_wire
from tests.support.in_process import InProcess, in_process

INVALID_PARAMS = -32602
INT4 = 2**31 - 1
LIMITS = PlanLimits(
    max_items=5, default_max_attempts=2, default_verify_timeout_s=600, max_verify_timeout_s=3600
)
GOOD_ITEM: dict[str, Any] = {"id": "a", "title": "A", "run": "true", "verify": "true"}


# ---- nonfinite_path: no server -----------------------------------------------------------

REQUEST = (
    '{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"parts": '
    '[{"data": {"plan": {"goal": "g", "items": [{"id": "a", "timeoutS": %s}]}}}]}}}'
)
PATH = "params.message.parts[0].data.plan.items[0].timeoutS"


@pytest.mark.parametrize(
    ("literal", "what"),
    [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("1e999", "1e999, beyond"),
        ("-1E+400", "-1E+400, beyond"),
        ("1.8e308", "1.8e308, beyond"),
        ("1" + "0" * 400, "0000…, beyond"),
        ("0.5" + "0" * 300 + "e309", "beyond"),
    ],
)
def test_nonfinite_numbers_are_found_by_path(literal: str, what: str) -> None:
    body = (REQUEST % literal).encode()
    assert nonfinite_path(body) == PATH
    found = nonfinite(body)
    assert found is not None and what in found.message
    assert found.message.startswith(f"{PATH} is not a number JSON can carry (")
    assert found.message.endswith("); send a finite number")


@pytest.mark.parametrize(
    "literal",
    [
        "600",
        "1.7976931348623157e308",
        "-1e-999",
        "1e308",
        "0." + "0" * 400 + "1",
        "1" * 300 + "e-100",
    ],
)
def test_finite_numbers_pass(literal: str) -> None:
    assert nonfinite_path((REQUEST % literal).encode()) is None


@pytest.mark.parametrize(
    ("body", "path"),
    [
        (b'{"a": "NaN", "b": "x: Infinity, 1e999"}', None),  # in strings: text, not numbers
        (b'{"a":[1,\n\t-Infinity]}', "a[1]"),
        (b'{"a b": {"c.d": NaN}}', '["a b"]["c.d"]'),
        (b'{"x": 1, "x": NaN}', "x"),  # a repeated key: the first NaN, whichever value wins
        (b'{"a": [[[{"b": [0, 1e999]}]]]}', "a[0][0][0].b[1]"),
        (b"NaN", "the request body"),
        (b'{"a": NaN', None),  # not JSON: the parser after us says so
        (b"", None),
        (b'{"raw": "' + b"NaN0e000e999" * 1000 + b'"}', None),
    ],
)
def test_nonfinite_paths(body: bytes, path: str | None) -> None:
    assert nonfinite_path(body) == path


def test_a_long_key_is_cut_in_the_path() -> None:
    path = nonfinite_path(b'{"' + b"k" * 5000 + b'": NaN}')
    assert path is not None and len(path) < 80 and path.endswith('…"]')


def test_the_message_helper() -> None:
    assert nonfinite_message("params.x") == (
        "params.x is not a number JSON can carry (NaN); send a finite number"
    )


# ---- the plan and budget parsers against their schemas: no server -----------------------


def as_value(value: Any) -> Any:
    """What a DataPart gives back: every number a float (a protobuf Value)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, dict):
        return {k: as_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_value(v) for v in value]
    return value


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` seven times in eight: a plan needs most of its fields right to reach the others."""
    return st.integers(0, 7).flatmap(lambda n: bad if n == 0 else good)


hostile_numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),  # NaN and infinities too: the parser refuses them if the door did not
    st.sampled_from([0, -1, 0.5, 2.5, -0.0, 86_401, INT4 + 1, 2**63, 1e300, True, False]),
    st.sampled_from(["5", "", [1], {"n": 1}, None]),
)
hostile_texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "   ", "a\nb", "tab\there", "x" * 501, "\x7f", 1, True, ["true"]]),
)


def counts(high: int) -> st.SearchStrategy[Any]:
    return mostly(st.integers(1, high) | st.floats(1, high).map(float.__floor__), hostile_numbers)


ids = mostly(
    st.from_regex(ITEM_ID, fullmatch=True).filter(lambda i: i not in ("plan", "task")),
    st.sampled_from(["", " ", "a\nb", "a\n", "a\x01", "-a", "x" * 65, "plan", "task", "é", 1]),
)
texts = mostly(st.text(min_size=1, max_size=20).filter(str.strip), hostile_texts)
titles = mostly(st.from_regex(r"[A-Za-z0-9 ]*[A-Za-z][A-Za-z0-9 ]*", fullmatch=True), texts)
commands = st.one_of(
    texts,
    st.fixed_dictionaries({"command": texts}, optional={"timeoutS": counts(3600)}),
)
checks = st.one_of(
    commands,
    st.fixed_dictionaries(
        {"command": texts},
        optional={"timeoutS": counts(3600), "independent": mostly(st.booleans(), hostile_texts)},
    ),
)
facts = st.lists(
    st.fixed_dictionaries({"key": ids, "check": texts}, optional={"maxAgeS": counts(10**7)}),
    max_size=3,
)
items = st.fixed_dictionaries(
    {"id": ids, "verify": checks},
    optional={
        "title": titles,
        "run": commands,
        "maxAttempts": counts(20),
        "timeoutS": counts(7 * 24 * 3600),
        "irreversible": mostly(st.booleans(), hostile_numbers),
        "precheck": st.booleans(),
        "facts": facts,
    },
)
policies = st.fixed_dictionaries(
    {},
    optional={
        "reverifyEvery": counts(10_000),
        "approvalExpiresS": counts(90 * 24 * 3600),
        "onWeakCheck": st.sampled_from(["warn", "ask", "refuse", "x"]),
        "reviewPlan": mostly(st.booleans(), hostile_numbers),
    },
)
plans = st.fixed_dictionaries(
    {"goal": texts, "items": st.lists(items, min_size=1, max_size=4)},
    optional={"policy": policies, "verify": commands},
)
budgets = st.fixed_dictionaries(
    {},
    optional={
        "maxUsd": mostly(st.floats(0.01, 250), hostile_numbers),
        "maxTokens": counts(200_000_000),
        "maxWallS": counts(14 * 24 * 3600),
        "maxStepsWithoutProgress": counts(5000),
        "maxActions": st.dictionaries(
            mostly(
                st.sampled_from(["*", "bash", "read_file", "a-b"]),
                st.sampled_from(["", " ", "a\n", "x" * 65, "a.b"]),
            ),
            counts(50_000),
            max_size=3,
        ),
    },
)
PLAN_SCHEMA = Draft202012Validator(plan_schema(LIMITS, "http://x"))
BUDGET_SCHEMA = Draft202012Validator(budget_schema(HARD_CAPS, "http://x"))
# Derandomized: the same 400 examples each run, so a CI run cannot fail by chance.
PROPERTIES = settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def unique(values: list[Any]) -> bool:
    return len(values) == len(set(map(str, values)))


def json_can_carry(value: Any) -> bool:
    """No NaN or infinity anywhere: JSON Schema's comparisons let NaN through (every one is
    false), but such a body never reaches a parser (the door refuses it, tested above)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(json_can_carry(v) for v in value.values())
    if isinstance(value, list):
        return all(json_can_carry(v) for v in value)
    return True


@PROPERTIES
@given(plan=plans)
def test_the_plan_parser_and_its_schema_agree(plan: dict[str, Any]) -> None:
    valid = PLAN_SCHEMA.is_valid(plan) and json_can_carry(plan)
    try:
        parsed = parse_plan(from_wire(as_value(plan), "plan"), LIMITS)
    except PlanError as refused:
        text = str(refused)
        assert "plan" in text or "policy" in text, text  # the field is named
        # What the schema takes the parser takes, but for what JSON Schema cannot say.
        said = [i.get("id") for i in plan["items"]]
        keys = [[f.get("key") for f in i.get("facts", [])] for i in plan["items"]]
        assert not (valid and unique(said) and all(unique(k) for k in keys)), text
        return
    assert valid, list(PLAN_SCHEMA.iter_errors(plan))[:1]  # accepted: the schema says so too
    for item in parsed.items:
        assert ITEM_ID.fullmatch(item.item_id) and not re.search(r"[\x00-\x1f]", item.title)
        for number in (item.verify_timeout_s, item.max_attempts, item.timeout_s or 1):
            assert type(number) is int and 1 <= number <= INT4
        assert all(type(f["max_age_s"]) is int and f["max_age_s"] <= INT4 for f in item.facts)


@PROPERTIES
@given(budget=budgets)
def test_the_budget_parser_and_its_schema_agree(budget: dict[str, Any]) -> None:
    valid = BUDGET_SCHEMA.is_valid(budget) and json_can_carry(budget)
    try:
        limits = effective_limits(from_wire(as_value(budget), "budget"), DEFAULT_LIMITS, HARD_CAPS)
    except PlanError as refused:
        assert "budget." in str(refused), str(refused)
        assert not valid, str(refused)
        return
    assert valid, list(BUDGET_SCHEMA.iter_errors(budget))[:1]
    assert isinstance(limits["max_usd"], float) and math.isfinite(limits["max_usd"])
    for key in ("max_tokens", "max_wall_s", "max_steps_without_progress"):
        assert type(limits[key]) is int and 1 <= limits[key] <= HARD_CAPS[key]
    assert all(type(n) is int and n >= 1 for n in limits["max_actions"].values())


# ---- over the wire: both bindings, both versions -----------------------------------------

BINDINGS = ("jsonrpc-1.0", "jsonrpc-0.3", "rest-1.0", "rest-0.3")
# Where the DataPart's value is in each binding's body (what the door's path starts with).
DATA_AT = {
    "jsonrpc-1.0": "params.message.parts[0].data.",
    "jsonrpc-0.3": "params.message.parts[0].data.",
    "rest-1.0": "message.parts[0].data.",
    "rest-0.3": "message.content[0].data.data.",
}
RAW = "__raw__"  # a placeholder replaced in the body by a literal json.dumps cannot write


@pytest.fixture(scope="module")
async def server(
    make_database: Callable[[str | None], str],
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[InProcess, str]]:
    """The app in process (the edge is all these refusals need), on a database of its own."""
    url = make_database(template_db)
    async with in_process(url, tmp_path_factory.mktemp("home")) as app:
        yield app, url


def body_for(binding: str, data: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
    message_id = str(uuid.uuid4())
    if binding == "jsonrpc-1.0":
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": data}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        return "/", {"A2A-Version": "1.0"}, body
    if binding == "jsonrpc-0.3":
        part = {"kind": "data", "data": data}
        message = {"kind": "message", "messageId": message_id, "role": "user", "parts": [part]}
        params = {"message": message, "configuration": {"blocking": False}}
        return "/", {}, {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params}
    if binding == "rest-1.0":
        message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"data": data}]}
        body = {"message": message, "configuration": {"returnImmediately": True}}
        return "/message:send", {"A2A-Version": "1.0"}, body
    message = {"messageId": message_id, "role": "ROLE_USER", "content": [{"data": {"data": data}}]}
    return "/v1/message:send", {}, {"message": message, "configuration": {"blocking": False}}


async def refusal(app: InProcess, binding: str, data: dict[str, Any], raw: str = "") -> str:
    """The protocol error `data` gets over `binding`: its message."""
    path, headers, body = body_for(binding, data)
    content = json.dumps(body, allow_nan=True)  # NaN and Infinity written as Python's json does
    if raw:
        content = content.replace(f'"{RAW}"', raw)
    response = await app.http.post(
        path, content=content.encode(), headers={**headers, "Content-Type": "application/json"}
    )
    answer = response.json()
    if binding.startswith("jsonrpc"):
        assert response.status_code == 200, response.text
        assert answer.get("error", {}).get("code") == INVALID_PARAMS, (binding, answer)
        text: str = answer["error"]["message"]
        return text
    assert response.status_code == 400, (binding, response.status_code, response.text)
    error = answer["error"]
    return str(error["message"] if isinstance(error, dict) else error)


def stored(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM tasks").fetchone()
    assert row is not None
    return int(row[0])


def plan_with(**fields: Any) -> dict[str, Any]:
    return {"plan": {"goal": "g", "items": [{**GOOD_ITEM, **fields}]}}


# (case, the DataPart's value, a literal for RAW, the path the door names under DATA_AT)
NONFINITE: list[tuple[str, dict[str, Any], str, str]] = [
    ("NaN timeout", plan_with(timeoutS=math.nan), "", "plan.items[0].timeoutS"),
    (
        "Infinity verify timeout",
        plan_with(verify={"command": "true", "timeoutS": math.inf}),
        "",
        "plan.items[0].verify.timeoutS",
    ),
    ("-Infinity attempts", plan_with(maxAttempts=-math.inf), "", "plan.items[0].maxAttempts"),
    ("1e999 budget", {**plan_with(), "budget": {"maxUsd": RAW}}, "1e999", "budget.maxUsd"),
    (
        "a 400-digit expiry",
        {"plan": {"goal": "g", "items": [GOOD_ITEM], "policy": {"approvalExpiresS": RAW}}},
        "1" + "0" * 400,
        "plan.policy.approvalExpiresS",
    ),
    (
        "NaN fact age",
        plan_with(facts=[{"key": "k", "check": "true", "maxAgeS": RAW}]),
        "1E+400",
        "plan.items[0].facts[0].maxAgeS",
    ),
    (
        "NaN clone depth",
        {**plan_with(), "workspace": {"git": {"url": "https://example.com/r.git", "depth": RAW}}},
        "NaN",
        "workspace.git.depth",
    ),
]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(
    ("data", "raw", "field"), [pytest.param(*c[1:], id=c[0]) for c in NONFINITE]
)
async def test_numbers_json_cannot_carry_are_refused_at_the_door(
    server: tuple[InProcess, str], binding: str, data: Any, raw: str, field: str
) -> None:
    app, url = server
    text = await refusal(app, binding, data, raw)
    assert f"{DATA_AT[binding]}{field} is not a number JSON can carry" in text, text
    assert text.endswith("send a finite number"), text
    assert stored(url) == 0


def item2(**fields: Any) -> dict[str, Any]:
    """A plan whose second item has `fields`: the field is named by its place."""
    return {"plan": {"goal": "g", "items": [GOOD_ITEM, {**GOOD_ITEM, "id": "b", **fields}]}}


GIT = "https://example.com/r.git"
# (case, the DataPart's value, what the refusal says: the field, and what it got)
HOSTILE: list[tuple[str, dict[str, Any], str]] = [
    (
        "fractional verify timeout",
        item2(verify={"command": "true", "timeoutS": 2.5}),
        "plan.items[1].verify.timeoutS must be a whole number of seconds between 1 and",
    ),
    ("negative item timeout", item2(timeoutS=-1), "plan.items[1].timeoutS must be"),
    ("zero item timeout", item2(timeoutS=0), "plan.items[1].timeoutS must be a whole number"),
    (
        "an item timeout beyond integer columns",
        item2(timeoutS=2**31),
        "plan.items[1].timeoutS must be a whole number of seconds between 1 and 604800; "
        "got 2147483648",
    ),
    ("a run timeout of 1e300", item2(run={"command": "true", "timeoutS": 1e300}), "run.timeoutS"),
    ("boolean attempts", item2(maxAttempts=True), "plan.items[1].maxAttempts must be a whole"),
    ("attempts as a string", item2(maxAttempts="3"), "got the string '3'"),
    ("too many attempts", item2(maxAttempts=1e9), "plan.items[1].maxAttempts"),
    ("run as a list", item2(run=["true"]), "plan.items[1].run must be a string"),
    ("verify as a number", item2(verify=5), "plan.items[1].verify must be a string"),
    ("empty id", item2(id=""), "plan.items[1].id must be"),
    ("id with a control character", item2(id="b\x01"), "plan.items[1].id must be"),
    ("id with a newline", item2(id="b\n"), "plan.items[1].id must be"),
    ("id too long", item2(id="b" * 65), "plan.items[1].id must be"),
    ("id as a list", item2(id=["b"]), "plan.items[1].id must be"),
    ("duplicate ids", item2(id="a"), "plan.items[1].id: item id 'a' appears twice"),
    ("empty title", item2(title=" "), "plan.items[1].title must be a non-empty string"),
    ("title of two lines", item2(title="a\nb"), "plan.items[1].title must be one line"),
    ("title too long", item2(title="t" * 501), "plan.items[1].title has 501 characters"),
    (
        "command too long",
        item2(run="x" * (MAX_COMMAND_CHARS + 1)),
        f"plan.items[1].run has {MAX_COMMAND_CHARS + 1} characters",
    ),
    ("ask as a number", item2(ask=1, run=None), "plan.items[1].ask must be a non-empty string"),
    ("goal as a list", {"plan": {"goal": ["g"], "items": [GOOD_ITEM]}}, "plan.goal must be"),
    (
        "duplicate fact keys",
        item2(facts=[{"key": "k", "check": "true"}, {"key": "k", "check": "true"}]),
        "plan.items[1].facts[1].key 'k' appears twice",
    ),
    (
        "fractional fact age",
        item2(facts=[{"key": "k", "check": "true", "maxAgeS": 0.5}]),
        "plan.items[1].facts[0].maxAgeS must be a whole number",
    ),
    (
        "fractional reverification",
        {"plan": {"goal": "g", "items": [GOOD_ITEM], "policy": {"reverifyEvery": 1.5}}},
        "policy.reverifyEvery must be a whole number",
    ),
    (
        "an expiry of 1e12",
        {"plan": {"goal": "g", "items": [GOOD_ITEM], "policy": {"approvalExpiresS": 1e12}}},
        "policy.approvalExpiresS must be a whole number of seconds between 1 and",
    ),
    (
        "fractional token budget",
        {**plan_with(), "budget": {"maxTokens": 1.5}},
        "budget.maxTokens must be a whole number",
    ),
    (
        "boolean wall time",
        {**plan_with(), "budget": {"maxWallS": False}},
        "budget.maxWallS must be a whole number more than 0; got false",
    ),
    ("negative money", {**plan_with(), "budget": {"maxUsd": -1}}, "budget.maxUsd must be"),
    (
        "absurd token budget",
        {**plan_with(), "budget": {"maxTokens": 1e300}},
        "budget.maxTokens is",
    ),
    (
        "an empty tool name",
        {**plan_with(), "budget": {"maxActions": {"": 5}}},
        "budget.maxActions has a key that is not a tool name",
    ),
    (
        "fractional actions",
        {**plan_with(), "budget": {"maxActions": {"bash": 2.5}}},
        "budget.maxActions.bash must be a whole number",
    ),
    (
        "fractional clone depth",
        {**plan_with(), "workspace": {"git": {"url": GIT, "depth": 2.5}}},
        "workspace.git.depth",
    ),
    (
        "clone depth of zero",
        {**plan_with(), "workspace": {"git": {"url": GIT, "depth": 0}}},
        "workspace.git.depth",
    ),
    ("empty earlier task", {**plan_with(), "workspace": {"fromTask": " "}}, "workspace.fromTask"),
    (
        "branch as a list",
        {**plan_with(), "publish": {"git": {"url": GIT, "branch": ["main"]}}},
        "publish.git.branch",
    ),
]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize(("case", "data", "expected"), HOSTILE, ids=[c[0] for c in HOSTILE])
async def test_hostile_values_are_refused_with_the_field_named(
    server: tuple[InProcess, str], binding: str, case: str, data: Any, expected: str
) -> None:
    app, url = server
    text = await refusal(app, binding, data)
    assert expected in text, text
    assert stored(url) == 0


async def test_nothing_was_stored_and_the_server_still_works(
    server: tuple[InProcess, str],
) -> None:
    app, url = server
    listed = (
        await app.http.post(
            "/",
            json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}},
            headers={"A2A-Version": "1.0"},
        )
    ).json()
    assert listed["result"].get("tasks", []) == [], listed
    assert stored(url) == 0
    # A plan whose numbers are floats that are whole (as a DataPart gives them) is taken.
    path, headers, body = body_for("jsonrpc-1.0", plan_with(timeoutS=60.0, maxAttempts=2.0))
    taken = (await app.http.post(path, json=body, headers=headers)).json()
    assert taken["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED", taken
