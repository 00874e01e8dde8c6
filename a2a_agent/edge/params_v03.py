"""An A2A 0.3 JSON-RPC call's params, checked with the SDK's own 0.3 models before its 0.3
layer sees them, and what is wrong said in a sentence that names each field.

The SDK's 0.3 layer answers a call its models refuse with -32600 (invalid request) holding
pydantic's dump (errors.pydantic.dev links, the input echoed), and logs a traceback each
time. A 0.3 client needs -32602 (invalid params) naming the field and what it takes.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, cast

import a2a.server.routes  # noqa: F401  (the 0.3 adapter's module imports this package first)
import pydantic
from a2a.compat.v0_3.jsonrpc_adapter import JSONRPC03Adapter

# The models the SDK's 0.3 layer validates each method's call with: the same check, so a call
# that passes here passes there.
MODELS: dict[str, type[pydantic.BaseModel]] = {
    method: cast(type[pydantic.BaseModel], model)
    for method, model in JSONRPC03Adapter.METHOD_TO_MODEL.items()
}
MAX_SAID = 4  # problems named in one answer; a caller fixes those and sends again
SHOWN_CHARS = 40
SCALARS = frozenset({"str", "int", "float", "bool"})  # a scalar union's alternatives

Loc = tuple[int | str, ...]
Problem = dict[str, Any]  # one of pydantic's errors: type, loc, msg, input, ctx

WHAT = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "list_type": "must be a list",
    "none_required": "must be null",
}


def params_problem(method: str, call: dict[str, Any]) -> tuple[bool, str] | None:
    """What is wrong with `call` of the 0.3 `method`, or None when the SDK's model takes it:
    (whether the fault is in its params, the sentence)."""
    model = MODELS.get(method)
    if model is None:
        return None
    try:
        model.model_validate(call)
    except pydantic.ValidationError as exc:
        problems: list[Problem] = [dict(p) for p in exc.errors(include_url=False)]
        in_params = all(p["loc"][:1] == ("params",) for p in problems)
        return in_params, invalid_call(method, _sentences(problems))
    return None


def invalid_call(method: str, said: Sequence[str]) -> str:
    """The answer's sentence: the first few problems, and how many more there are."""
    more = len(said) - MAX_SAID
    text = "; ".join(said[:MAX_SAID]) + (f"; and {more} more" if more > 0 else "")
    return f"invalid {method!r} call: {text}"


def _sentences(problems: Sequence[Problem]) -> list[str]:
    """One sentence per problem, after the alternatives of a union (a part is a text, file
    or data part) are narrowed to the one the input names."""
    said: list[str] = []
    for problem in _narrowed(problems):
        said.append(_sentence(problem))
    return list(dict.fromkeys(said))


def _branch_at(loc: Loc) -> int | None:
    """Where `loc` names an alternative of a union (the SDK's 0.3 models are classes named
    in CamelCase, the wire's fields in camelCase; a scalar union names its types), or None."""
    for n, step in enumerate(loc):
        if isinstance(step, str) and (step[:1].isupper() or step in SCALARS):
            return n
    return None


def _narrowed(problems: Sequence[Problem]) -> list[Problem]:
    """The problems with each union resolved: pydantic reports every alternative's; only the
    one whose `kind` the input gives (or, with none given, the nearest) matters."""
    plain: list[Problem] = []
    unions: dict[Loc, dict[str, list[Problem]]] = defaultdict(lambda: defaultdict(list))
    for problem in problems:
        at = _branch_at(problem["loc"])
        if at is None:
            plain.append(problem)
        else:
            unions[problem["loc"][:at]][str(problem["loc"][at])].append(
                {**problem, "loc": problem["loc"][:at] + problem["loc"][at + 1 :]}
            )
    for where, branches in unions.items():
        plain += _one_of(where, branches)
    return plain


def _one_of(where: Loc, branches: dict[str, list[Problem]]) -> list[Problem]:
    """The problems that matter of a union at `where`, from each alternative's."""
    kind_at = (*where, "kind")

    def wrong_kind(found: list[Problem]) -> bool:
        return any(p["type"] == "literal_error" and p["loc"] == kind_at for p in found)

    claimed = [found for found in branches.values() if not wrong_kind(found)]
    if len(claimed) == 1:
        return _narrowed(claimed[0])  # the kind the input names: its own problems
    if not claimed:
        kinds = [p for found in branches.values() for p in found if p["loc"] == kind_at]
        expected = _either(str(p.get("ctx", {}).get("expected")) for p in kinds)
        return [{"type": "choice", "loc": kind_at, "expected": expected,
                 "input": kinds[0].get("input")}]  # fmt: skip
    if all(len(f) == 1 and f[0]["loc"] == where and f[0]["type"] in WHAT for f in claimed):
        # A scalar of none of the types (an id that is neither a string nor a number).
        expected = _either(WHAT[f[0]["type"]].removeprefix("must be ") for f in claimed)
        return [{"type": "choice", "loc": where, "expected": expected,
                 "input": claimed[0][0].get("input")}]  # fmt: skip
    if all(p["type"] == "missing" and len(p["loc"]) == len(where) + 1
           for found in claimed for p in found):  # fmt: skip
        # Nothing given of any alternative: what each would need.
        needs = _either(repr(str(found[0]["loc"][-1])) for found in claimed)
        hint = ' (and "kind" naming which)' if any(n.endswith("Part") for n in branches) else ""
        return [{"type": "needs", "loc": where, "msg": f"needs {needs}{hint}"}]
    nearest = min(claimed, key=lambda f: (sum(p["type"] == "missing" for p in f), len(f)))
    return _narrowed(nearest)


def _either(options: Iterable[str]) -> str:
    unique = list(dict.fromkeys(options))
    return unique[0] if len(unique) == 1 else ", ".join(unique[:-1]) + " or " + unique[-1]


def _sentence(problem: Problem) -> str:
    where = _path(problem["loc"])
    kind = problem["type"]
    if kind == "missing":
        return f"{where} is required"
    if kind == "choice":
        return f"{where} must be {problem['expected']} (got {shown(problem.get('input'))})"
    if kind in ("enum", "literal_error"):
        expected = problem.get("ctx", {}).get("expected") or problem["msg"]
        return f"{where} must be {expected} (got {shown(problem.get('input'))})"
    if kind == "needs":
        return f"{where} {problem['msg']}"
    if kind in WHAT:
        return f"{where} {WHAT[kind]} (got {shown(problem.get('input'))})"
    return f"{where}: {problem['msg']}"


def _path(loc: Loc) -> str:
    text = ""
    for step in loc:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "the call"


def shown(value: Any) -> str:
    """The input, short: a caller recognizes it without a megabyte echoed back."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 3] + "..."
