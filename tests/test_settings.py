"""Settings (issue 24, "Rooms"): every variable is declared once, beside its field and
default; docs/settings.md lists the same variables, under the same sections, with the same
defaults; `with_overrides` still takes the flat names callers use. In process, no server."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from a2a_agent import settings as settings_module
from a2a_agent.budget import DEFAULT_LIMITS, HARD_CAPS
from a2a_agent.errors import ConfigError
from a2a_agent.settings import (
    DEFAULT_IRREVERSIBLE,
    FLAT_NAMES,
    PACKAGED_CARD,
    SECTIONS,
    Settings,
    Variable,
    defaults,
    variables,
)

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "settings.md"
# The package's modules, where every variable is named (a2a_agent/settings/).
SOURCE = "".join(p.read_text() for p in sorted(Path(settings_module.__file__).parent.glob("*.py")))
NAME = r"(?:A2A_AGENT_[A-Z0-9_]+|ANTHROPIC_[A-Z_]+|DATABASE_URL|OTEL_[A-Z_]+)"
# Variables the doc lists that Settings does not read: where they are read instead.
ELSEWHERE = {"OTEL_TRACES_EXPORTER": REPO / "a2a_agent" / "observe" / "tracing.py"}
# Defaults the doc describes in words rather than as a value: what the code's must be.
DESCRIBED: dict[str, object] = {
    "DATABASE_URL": None,  # embedded
    "A2A_AGENT_PUBLIC_URL": None,  # http://HOST:PORT
    "A2A_AGENT_EXECUTOR_ID": "",  # <hostname>-<role>, filled in by from_env
    "A2A_AGENT_CARD": PACKAGED_CARD,
    "A2A_AGENT_BUDGET_CAPS": HARD_CAPS,
    "A2A_AGENT_BUDGET_DEFAULTS": DEFAULT_LIMITS,
    "A2A_AGENT_IRREVERSIBLE": DEFAULT_IRREVERSIBLE,
    "A2A_AGENT_SECRET_KEY": None,  # a key made under A2A_AGENT_HOME
}
EMPTY = ("unset", "(none)")


def documented() -> list[tuple[str | None, list[str], list[str]]]:
    """Each table row of the doc: its section (None: Settings itself), its variables, and
    the default cell split as the variables are."""
    rows = []
    section: str | None = None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            found = re.search(r"`settings\.(\w+)`", line)
            section = found.group(1) if found and found.group(1) in SECTIONS else None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `") or len(cells) != 3:
            continue
        names = re.findall(rf"`({NAME})`", cells[0])
        parts = cells[1].split(" / ") if len(names) > 1 else [cells[1]]
        if len(parts) == 1:  # one default said of them all ("see a2a_agent/budget.py")
            parts *= len(names)
        rows.append((section, names, parts))
    return rows


def table() -> dict[str, Variable]:
    return {v.name: v for v in variables()}


def test_the_settings_package_names_only_the_variables_of_its_table() -> None:
    named = set(re.findall(rf'"({NAME})"', SOURCE))
    assert named == set(table())
    assert len(list(variables())) == len(table()), "a variable declared twice"


def test_the_doc_lists_every_variable_under_its_section() -> None:
    code = table()
    listed: dict[str, str | None] = {}
    for section, names, _ in documented():
        for name in names:
            assert name not in listed, f"{name} is listed twice"
            listed[name] = section
    for name, where in ELSEWHERE.items():
        assert listed.pop(name, "missing") != "missing", name
        assert f'"{name}"' in where.read_text(), where
    assert set(listed) == set(code), (
        f"not in the doc: {sorted(set(code) - set(listed))}; "
        f"not in the code: {sorted(set(listed) - set(code))}"
    )
    wrong = {n: (s, code[n].section) for n, s in listed.items() if s != code[n].section}
    assert not wrong, f"listed under another section (doc, code): {wrong}"


def test_each_documented_default_is_the_code_default() -> None:
    code = table()
    checked = 0
    for _, names, parts in documented():
        for name, text in zip(names, parts, strict=True):
            if name not in code:
                continue
            variable = code[name]
            if name in DESCRIBED:
                assert variable.default == DESCRIBED[name], name
            elif text in EMPTY:
                assert variable.default in (None, "", (), {}), (name, variable.default)
            else:
                literal = re.fullmatch(r"`([^`]*)`", text)
                assert literal, f"{name}: the default {text!r} is neither a value nor described"
                section = Settings if variable.section is None else SECTIONS[variable.section]
                # The documented text, read as the variable would be, is the code's default.
                read = variable.how.parse(
                    name, literal.group(1), variable.default, defaults(section)
                )
                assert read == variable.default, (name, text, variable.default)
            checked += 1
    assert checked == len(code)


def test_from_env_of_nothing_is_the_dataclass_defaults() -> None:
    """`from_env` adds no default of its own: what it reads from an empty environment is what
    the sections hold when made with nothing (beside the three values made at start)."""
    read = Settings.from_env({}, role="worker")
    made = Settings()
    assert read.home == made.home.resolve()
    assert read.worker.executor_id.endswith("-worker") and made.worker.executor_id == ""
    assert read.commands.env == {} and made.commands.env == {}
    for name in SECTIONS:
        if name != "worker":
            assert getattr(read, name) == getattr(made, name), name
    for f in fields(made.worker):
        if f.name != "executor_id":
            assert getattr(read.worker, f.name) == getattr(made.worker, f.name), f.name


def test_each_variable_reaches_its_field() -> None:
    given = {
        "A2A_AGENT_PORT": ("9001", ("server", "port"), 9001),
        "A2A_AGENT_HTTP": ("h11", ("server", "http"), "h11"),
        "A2A_AGENT_SANDBOX": ("off", ("commands", "sandbox"), False),
        "A2A_AGENT_ALLOWED_HOSTS": (
            "A.example, b",
            ("server", "allowed_hosts"),
            ("a.example", "b"),
        ),
        "A2A_AGENT_TASK_RETENTION_S": ("0", ("retention", "task_s"), 0.0),
        "A2A_AGENT_IRREVERSIBLE": ("", ("policy", "irreversible_patterns"), ()),
        "A2A_AGENT_DB_POOL_MAX": ("3", ("database", "pool_max"), 3),
        "A2A_AGENT_MODEL": ("m", ("model", "name"), "m"),
        "A2A_AGENT_PUSH_DELIVERY": ("off", ("push", "delivery"), "off"),
        "A2A_AGENT_LOG_FORMAT": ("json", ("logging", "format"), "json"),
    }
    read = Settings.from_env({name: raw for name, (raw, _, _) in given.items()})
    for name, (_, (section, field), value) in given.items():
        assert getattr(getattr(read, section), field) == value, name
    caps = '{"max_usd": 10}'
    env = {"A2A_AGENT_BUDGET_CAPS": caps, "A2A_AGENT_BUDGET_DEFAULTS": '{"max_usd": 20}'}
    with pytest.raises(ConfigError, match="A2A_AGENT_BUDGET_DEFAULTS"):
        Settings.from_env(env)  # the defaults are read within the caps read before them


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("A2A_AGENT_PORT", "eighty"),
        ("A2A_AGENT_WORKER_CONCURRENCY", "0"),
        ("A2A_AGENT_QUEUE_POLL_S", "0"),
        ("A2A_AGENT_SANDBOX", "maybe"),
        ("A2A_AGENT_IRREVERSIBLE", "(unclosed"),
        ("A2A_AGENT_HTTP", "h3"),
    ],
)
def test_a_bad_value_names_its_variable(name: str, raw: str) -> None:
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: raw})


def test_with_overrides_takes_the_flat_names() -> None:
    base = Settings.from_env({})
    changed = base.with_overrides(
        host="0.0.0.0", port=1, run_worker=False, push_delivery="inline", executor_id="x"
    )
    assert (changed.server.host, changed.server.port) == ("0.0.0.0", 1)
    assert (changed.worker.run_worker, changed.worker.executor_id) == (False, "x")
    assert changed.push.delivery == "inline" and base.push.delivery == "process"
    for flat, (section, field) in FLAT_NAMES.items():
        marker: Any = object()
        assert getattr(getattr(base.with_overrides(**{flat: marker}), section), field) is marker
    with pytest.raises(TypeError, match="no setting named"):
        base.with_overrides(no_such_setting=1)


def test_secrets_stay_out_of_the_repr() -> None:
    text = repr(
        Settings.from_env(
            {
                "ANTHROPIC_API_KEY": "sk-secret-1",
                "A2A_AGENT_SECRET_KEY": "secret-2",
                "A2A_AGENT_GIT_CREDENTIALS": '{"c": {"username": "u", "password": "secret-3"}}',
                "A2A_AGENT_PEERS": '[{"name": "p", "url": "http://p", "key": "secret-4"}]',
            }
        )
    )
    assert "secret" not in text
