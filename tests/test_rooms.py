"""The harness's rooms import only downward: each room only from the rooms before it, and no
room from the engine, the A2A edge, DBOS or the A2A SDK (docs/ARCHITECTURE.md, "The harness,
inside"). Every import counts, those under `TYPE_CHECKING` too. No I/O beyond reading the
sources: it runs in milliseconds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import a2a_agent.harness

HARNESS = Path(a2a_agent.harness.__file__).parent
PACKAGE = "a2a_agent.harness"
# The rooms in reading order: each may import only the rooms before it.
ROOMS = ("workspace", "kernel", "checks", "model", "delegation")
FORBIDDEN = ("a2a_agent.engine", "a2a_agent.edge", "dbos", "a2a")


def _modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(HARNESS.rglob("*.py")):
        parts = path.relative_to(HARNESS).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join((PACKAGE, *parts)), path


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module `path` imports, as an absolute name (`from x import y` gives `x.y` too,
    since y may be a module)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != PACKAGE.split(".") or len(parts) < 3:
        return None
    return parts[2]


def test_every_harness_module_is_in_a_room() -> None:
    loose = [name for name, _ in _modules() if name != PACKAGE and _room(name) not in ROOMS]
    assert loose == [], f"modules outside the rooms {ROOMS}: {loose}"


def test_rooms_import_only_the_rooms_before_them() -> None:
    wrong = []
    for name, path in _modules():
        room = _room(name)
        if room is None:
            continue
        allowed = set(ROOMS[: ROOMS.index(room) + 1])
        for imported in _imports(name, path):
            other = _room(imported)
            if other is not None and other not in allowed:
                wrong.append(f"{name} imports {imported} ({room} -> {other})")
    assert wrong == [], "\n".join(wrong)


def test_kernel_imports_only_the_workspace_and_the_workspace_no_room() -> None:
    for name, path in _modules():
        room = _room(name)
        if room not in ("kernel", "workspace"):
            continue
        rooms = {_room(i) for i in _imports(name, path)} - {None, room}
        assert rooms <= ({"workspace"} if room == "kernel" else set()), (name, rooms)


def test_no_room_imports_the_engine_the_edge_dbos_or_a2a() -> None:
    wrong = [
        f"{name} imports {imported}"
        for name, path in _modules()
        for imported in _imports(name, path)
        if any(imported == f or imported.startswith(f + ".") for f in FORBIDDEN)
    ]
    assert wrong == [], "\n".join(wrong)


def _reading_order(room: str) -> list[str]:
    """The room's modules in the order its docstring names them (first mention counts)."""
    init = HARNESS / room / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    modules = {p.stem for p in (HARNESS / room).glob("*.py")} - {"__init__"}
    order: list[str] = []
    for word in re.findall(r"`(\w+)`", doc):
        if word in modules and word not in order:
            order.append(word)
    return order


def test_each_room_reads_in_the_order_its_docstring_gives() -> None:
    """A room's docstring names every module in it, and each module imports only modules
    named before it: nothing borrows a helper from a module above it."""
    wrong = []
    for room in ROOMS:
        order = _reading_order(room)
        missing = {p.stem for p in (HARNESS / room).glob("*.py")} - {"__init__", *order}
        assert not missing, f"{room}/__init__.py does not name {sorted(missing)}"
        for n, module in enumerate(order):
            name = f"{PACKAGE}.{room}.{module}"
            for imported in _imports(name, HARNESS / room / f"{module}.py"):
                parts = imported.split(".")
                inside = parts[:3] == [*PACKAGE.split("."), room] and len(parts) > 3
                if inside and parts[3] in order[n:]:
                    wrong.append(f"{name} imports {imported}, named after it")
    assert wrong == [], "\n".join(wrong)


def test_harness_imports_have_no_cycle() -> None:
    names = dict(_modules())
    graph = {
        name: {i for i in _imports(name, path) if i in names and i != name}
        for name, path in names.items()
    }
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> None:
        if node in path:
            cycle = [*path[path.index(node) :], node]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if node in done:
            return
        path.append(node)
        for nxt in sorted(graph[node]):
            visit(nxt)
        path.pop()
        done.add(node)

    for node in sorted(graph):
        visit(node)


# Each SDK at its edge only (house style 3): the packages that may import it.
SDK_EDGES = {
    "mcp": ("a2a_agent.mcp_door",),
    "mcp_types": ("a2a_agent.mcp_door",),
    "anthropic": ("a2a_agent.model.anthropic_adapter",),
}


def test_each_sdk_is_imported_only_at_its_edge() -> None:
    root = HARNESS.parent
    wrong = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for imported in _imports(name, path):
            sdk = imported.split(".")[0]
            edges = SDK_EDGES.get(sdk)
            if edges and not any(name == e or name.startswith(e + ".") for e in edges):
                wrong.append(f"{name} imports {imported}")
    assert wrong == [], "\n".join(wrong)
