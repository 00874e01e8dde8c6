"""`step_json` and `record_step()` agree on every key.

`record_step()` (persistence/functions.sql) reads a StepRecord as JSON with `p_step ->> 'key'`
and `p_step -> 'key'`; a key spelled differently on either side is a silent NULL. This module
reads the SQL, collects every path it reads out of `p_step` (through the variables, loop
variables and row aliases that hold a part of it, and two calls deep into the functions it
hands a part to, such as `apply_task_change()` and its `insert_transitions()`), and checks
both directions against what `step_json` makes of a StepRecord with every field set.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import persistence
from persistence.records import (
    Charge,
    Checkpoint,
    EffectStart,
    Fact,
    ItemChange,
    ItemRow,
    ModelCall,
    NewDelegation,
    NewItem,
    OutputFile,
    PauseRequest,
    StepRecord,
    Transition,
)
from persistence.runs import (
    STEP_ADDED,
    STEP_CONVERTERS,
    STEP_FOLDED,
    STEP_RENAMES,
    recorded_items,
    step_json,
)

Path_ = tuple[str, ...]
FUNCTIONS = Path(persistence.__file__).with_name("functions.sql")

# Values the store computes (persistence/views.py) that the SQL stores whole.
COMPUTED: set[Path_] = {
    ("item", "view"),
    ("more_items", "view"),
    ("new_items", "view"),
    ("new_items", "evidence"),
    ("new_items", "history"),
    ("summary",),
}

# Keys step_json makes that the SQL does not read, each with the reason it may stay so.
NOT_READ: dict[Path_, str] = {
    ("facts", "age_s"): "a fact's age is worked out when the view reads it; a record's is 0",
}

# --- reading the SQL ------------------------------------------------------------------------

_CHAIN = r"((?:\s*(?:->>?|\?)\s*'[^']*')*)"


def _functions(sql: str) -> dict[str, tuple[list[str], str]]:
    """Every function in the file: its parameter names and its body, comments removed."""
    found = {}
    for m in re.finditer(
        r"CREATE OR REPLACE FUNCTION (\w+)\((.*?)\)\s*RETURNS.*?\$\$(.*?)\$\$;", sql, re.S
    ):
        params = [p.split()[0] for p in m.group(2).split(",") if p.strip()]
        found[m.group(1)] = (params, re.sub(r"--[^\n]*", "", m.group(3)))
    return found


def _balanced(text: str, open_at: int) -> str:
    """What is inside the parenthesis that opens at `open_at`."""
    depth = 0
    for n in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[n], 0)
        if depth == 0:
            return text[open_at + 1 : n]
    raise AssertionError(f"unbalanced parenthesis at {text[open_at : open_at + 60]!r}")


def _split(args: str) -> list[str]:
    """`args` split at its top-level commas."""
    parts, depth, start = [], 0, 0
    for n, ch in enumerate(args):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(args[start:n].strip())
            start = n + 1
    return [*parts, args[start:].strip()]


def _keys(chain: str) -> Path_:
    return tuple(re.findall(r"'([^']*)'", chain))


def _uses(text: str, name: str) -> Iterator[Path_]:
    """The key chains read after each use of `name` (empty for a bare use)."""
    for m in re.finditer(rf"(?<![\w.]){re.escape(name)}\b{_CHAIN}", text):
        yield _keys(m.group(1))


def _sources(text: str, root: str, names: dict[str, set[Path_]]) -> set[Path_]:
    """The paths of the root's JSON that `text` reads, directly or through `names`."""
    paths = {chain for chain in _uses(text, root) if chain}
    for name, held in names.items():
        for chain in _uses(text, name):
            paths |= {h + chain for h in held}
    return paths


def _element_aliases(text: str) -> Iterator[tuple[str, str]]:
    """(alias, expression) for every `jsonb_array_elements(expr) ... AS alias [(col, ...)]`."""
    for m in re.finditer(r"jsonb_array_elements\(", text):
        inner = _balanced(text, m.end() - 1)
        tail = text[m.end() + len(inner) + 1 :]
        alias = re.match(r"\s*(?:WITH ORDINALITY\s*)?AS\s+(\w+)\s*(?:\(\s*(\w+))?", tail)
        if alias:
            yield (
                (f"{alias.group(1)}.{alias.group(2)}" if alias.group(2) else alias.group(1)),
                inner,
            )


def reads(
    name: str, param: str, functions: dict[str, tuple[list[str], str]], *, depth: int = 2
) -> set[Path_]:
    """Every path function `name` reads out of its jsonb parameter `param`, and (`depth`
    calls deep) what the functions it calls (`PERFORM f(...)`, `v := f(...)`) read out of
    the parts of it they are given."""
    body = functions[name][1]
    names: dict[str, set[Path_]] = {}
    declare, _, code = body.partition("BEGIN")
    for m in re.finditer(r"(\w+)\s+jsonb\s*:=\s*(.*?);", declare, re.S):
        names[m.group(1)] = _sources(m.group(2), param, names) | (
            {()} if re.fullmatch(rf"\s*{param}\s*", m.group(2)) else set()
        )
    for m in re.finditer(
        r"FOR\s+(\w+)\s+IN\s+SELECT\s+value\s+FROM\s+jsonb_array_elements\(", code
    ):
        held = _sources(_balanced(code, m.end() - 1), param, names)
        names[m.group(1)] = names.get(m.group(1), set()) | held
    paths = _sources(body, param, names)  # the declarations' own reads too
    for statement in code.split(";"):  # a row alias holds its part within its statement
        for alias, expression in _element_aliases(statement):
            held = _sources(expression, param, names)
            held |= {()} if expression.strip() == param else set()  # the parameter itself
            paths |= {h + chain for chain in _uses(statement, alias) for h in held}
    for m in re.finditer(r"(?:PERFORM|:=)\s*(\w+)\(", code if depth > 0 else ""):
        if m.group(1) not in functions:
            continue
        callee_params = functions[m.group(1)][0]
        for n, arg in enumerate(_split(_balanced(code, m.end() - 1))):
            callee_reads = reads(m.group(1), callee_params[n], functions, depth=depth - 1)
            built = re.fullmatch(r"jsonb_build_object\((.*)\)", arg, re.S)
            pairs = _split(built.group(1)) if built else []
            if built and len(pairs) % 2 == 0:  # key by key: what each key is made from
                given = {
                    _keys(k)[0]: _sources(v, param, names)
                    for k, v in zip(pairs[::2], pairs[1::2], strict=True)
                }
                for path in callee_reads:
                    paths |= {h + path[1:] for h in given.get(path[0], set())}
            else:
                whole = _sources(arg, param, names) | ({()} if arg == param else set())
                paths |= {h + path for h in whole for path in callee_reads}
    return paths


def step_reads() -> set[Path_]:
    return reads("record_step", "p_step", _functions(FUNCTIONS.read_text()))


# --- what step_json makes -------------------------------------------------------------------


def full_record() -> StepRecord:
    """A StepRecord with every field (and every field of its parts) set."""
    at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    change = ItemChange("i1", "done", 2, {"exit": 0}, "abc", 1, [{"attempt": 1}], {"title": "T"})
    return StepRecord(
        effect_key="T:i1:2:verify",
        step="verify",
        result={"ok": True},
        item=change,
        more_items=[dataclasses.replace(change, item_id="i2")],
        task_state="working",
        status_text="working on it",
        transitions=[Transition("done", "verified", "i1", 2, "verifying", at)],
        report={"outcome": "completed"},
        fingerprint="fp",
        checkpoint=Checkpoint("abc", b"bundle"),
        new_items=[
            NewItem(
                "n1",
                "New",
                "make",
                "make test",
                60,
                3,
                run_timeout_s=30,
                timeout_s=600,
                irreversible=True,
                ask="why?",
                facts=[{"key": "k"}],
                precheck=False,
                verify_independent=True,
                delegate_to={"peer": "p"},
            )
        ],
        charge=Charge("tool", 10, 0.5, 1, "bash"),
        metadata_patch={"m": 1},
        policy_patch={"p": 1},
        base_sha="base",
        seed_patch={"commit": "abc"},
        outputs=[OutputFile("diff", "text/x-diff", "run.diff", b"+x")],
        delegation=NewDelegation("d1", "goal", "i1", 2, "peer", "child", "remote", "working"),
        model_call=ModelCall("plan", "m", "end_turn", 1, 2, 3, 4),
        runs=2,
        item_id="i1",
        attempt=2,
        then=EffectStart("T:i1:2:next", "next", "i1", 2),
        pause=PauseRequest("p1", "question", "s", ["a"], "a", 60.0, {"d": 1}, "i1", 2),
        facts=[Fact("k", "v", "src", "check", 60, 1.0)],
        first_position=3,
        closing=True,
        started_at=at,
    )


def read_items() -> list[ItemRow]:
    """The items full_record()'s step read: the two it changes."""
    return [
        ItemRow(f"i{n}", n - 1, f"item {n}", "make", "true", 5, 3, "in_progress", 1, None,
                None, 0)
        for n in (1, 2)
    ]  # fmt: skip


def made_json(record: StepRecord, items: list[ItemRow] | None = None) -> Any:
    """step_json of `record`, recorded against `items` (read_items() unless given)."""
    items = read_items() if items is None else items
    return step_json(record, recorded_items(record, items))


def _unset(value: Any, where: str) -> Iterator[str]:
    """The fields of `value` and its parts left at nothing (None, empty) or at their default."""
    for f in dataclasses.fields(value):
        inner = getattr(value, f.name)
        factory = f.default_factory
        default = f.default if factory is dataclasses.MISSING else factory()
        if inner is None or inner in ([], {}, "") or inner == default:
            yield f"{where}.{f.name}"
        for n, part in enumerate(inner if isinstance(inner, list) else [inner]):
            if dataclasses.is_dataclass(part) and not isinstance(part, type):
                yield from _unset(part, f"{where}.{f.name}[{n}]")


def _free_form() -> set[Path_]:
    """Where step_json's JSON holds a JSON value of the caller's (a `JSON` field): the SQL may
    read keys inside it that no dataclass declares."""
    free: set[Path_] = set()

    def walk(cls: type, prefix: Path_, renames: dict[str, str]) -> None:
        for name, hint in typing.get_type_hints(cls).items():
            key = (*prefix, renames.get(name, name))
            for t in _leaves(hint):
                if isinstance(t, type) and dataclasses.is_dataclass(t):
                    walk(t, key, {})
                elif t is dict or typing.get_origin(t) is dict:
                    free.add(key)

    walk(StepRecord, (), STEP_RENAMES)
    return free | COMPUTED


def _leaves(hint: Any) -> Iterable[Any]:
    """The types inside `X | None` and `list[X]`."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) is list or (args and type(None) in args):
        for arg in args:
            yield from _leaves(arg)
    else:
        yield hint


def _missing(value: Any, path: Path_, done: Path_, free: set[Path_]) -> str | None:
    """Why `path` cannot be read from `value` (None when it can)."""
    if done in free or not path:
        return None
    if isinstance(value, list):
        for element in value:
            if why := _missing(element, path, done, free):
                return why
        return None
    if not isinstance(value, dict) or path[0] not in value:
        return f"no key {path[0]!r} under {'.'.join(done) or 'the top'}"
    return _missing(value[path[0]], path[1:], (*done, path[0]), free)


def _made(value: Any, done: Path_, free: set[Path_]) -> Iterator[Path_]:
    """Every key path in step_json's JSON, down to the caller's own JSON values."""
    if done in free:
        return
    if isinstance(value, list):
        for element in value:
            yield from _made(element, done, free)
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield (*done, key)
            yield from _made(inner, (*done, key), free)


def _arrow(path: Path_) -> str:
    return "p_step" + "".join(f" -> '{k}'" for k in path)


# --- the checks -----------------------------------------------------------------------------


def test_the_full_record_sets_every_field() -> None:
    unset = list(_unset(full_record(), "StepRecord"))
    assert not unset, f"full_record() leaves these unset, so they go unchecked: {unset}"


def test_the_field_tables_name_fields_of_step_record() -> None:
    fields = {f.name for f in dataclasses.fields(StepRecord)}
    for table in (STEP_RENAMES, STEP_CONVERTERS, STEP_FOLDED):
        assert set(table) <= fields, f"not fields of StepRecord: {set(table) - fields}"
    assert not set(STEP_ADDED) & fields, "a key made from no field names a field"


def test_the_sql_is_read_as_expected() -> None:
    """The reader finds reads at every depth: directly, through a variable, a loop variable,
    a row alias, and a call of apply_task_change()."""
    read = step_reads()
    for path in [
        ("effect_key",),
        ("charge", "kind"),
        ("item", "run"),
        ("item", "view"),
        ("summary",),
        ("more_items", "status"),
        ("new_items", "verify_command"),
        ("transitions", "at"),
        ("transitions", "reason"),
        ("facts", "max_age_s"),
    ]:
        assert path in read, f"the reader of functions.sql missed {_arrow(path)}"


def test_every_key_record_step_reads_is_made_by_step_json() -> None:
    made, free = made_json(full_record()), _free_form()
    problems = [
        f"record_step() reads {_arrow(path)}, but step_json() makes {why}"
        for path in sorted(step_reads())
        if (why := _missing(made, path, (), free))
    ]
    assert not problems, "\n".join(problems)


def test_every_key_step_json_makes_is_read_by_record_step() -> None:
    read = step_reads()
    prefixes = {path[:n] for path in read for n in range(1, len(path) + 1)}
    unread = [
        f"step_json() makes {_arrow(path)}, which record_step() never reads "
        "(a misspelled key? else list it in NOT_READ with why)"
        for path in sorted(set(_made(made_json(full_record()), (), _free_form())))
        if path not in prefixes and path not in NOT_READ
    ]
    assert not unread, "\n".join(unread)


def test_not_read_lists_only_keys_step_json_makes() -> None:
    made = set(_made(made_json(full_record()), (), _free_form()))
    assert set(NOT_READ) <= made, (
        f"NOT_READ names keys step_json() no longer makes: {set(NOT_READ) - made}"
    )


def test_step_json_is_what_the_fields_say() -> None:
    record = full_record()
    made = made_json(record)
    assert made["checkpoint_sha"] == "abc" and "checkpoint" not in made
    assert (made["effect_item_id"], made["effect_attempt"]) == ("i1", 2)
    assert made["new_items"][0]["position"] == 3 and "first_position" not in made
    assert made["transitions"][0]["at"] == "2024-01-02T03:04:05+00:00"
    assert made["outputs"][0]["size"] == 2 and made["outputs"][0]["body"] == "K3g="
    assert made["started_at"] == "2024-01-02T03:04:05+00:00"
    assert made["item"]["title"] == "T" and made["item"]["view"]["title"] == "T"
    assert made["more_items"][0]["commit_sha"] == "abc"
    assert made["summary"]["progress"]["items_total"] == 3  # the two read, and one new
    bare_step = StepRecord("k", "s", {}, item=ItemChange("i1", "in_progress", 3))
    bare = made_json(bare_step)
    assert (bare["effect_item_id"], bare["effect_attempt"]) == ("i1", 3)
    assert made_json(StepRecord("k", "s", {}))["summary"] is None  # no item changes
