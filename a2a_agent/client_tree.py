"""`a2a-agent tasks tree`: a run and the runs around it (its parent, the child runs it
delegated to, the peers' tasks), read over A2A like everything else the CLI shows: a child
run's metadata names its parent, a run's `delegations` name its children and peer tasks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from a2a.types.a2a_pb2 import Task
from google.protobuf.json_format import MessageToDict
from rich.text import Text
from rich.tree import Tree

from a2a_agent.client_view import COLORS, goal_of, state_name

MAX_DEPTH = 20  # as the service caps a chain of delegations it walks
Fetch = Callable[[str], Awaitable[Task | None]]


def parent_of(task: Task) -> str | None:
    parent = MessageToDict(task.metadata).get("parent")
    return str(parent) if parent else None


def delegations_of(task: Task) -> list[dict[str, Any]]:
    return [dict(d) for d in MessageToDict(task.metadata).get("delegations") or []]


async def run_tree(task: Task, fetch: Fetch) -> dict[str, Any]:
    """The tree the task belongs to, from its topmost parent down, as nested dicts."""
    root, seen = task, {task.id}
    for _ in range(MAX_DEPTH):
        parent = parent_of(root)
        if parent is None or parent in seen:
            break
        found = await fetch(parent)
        if found is None:
            break  # another principal's, or gone: the tree starts here
        root = found
        seen.add(parent)
    return await _node(root, fetch, task.id, 0)


async def _node(task: Task, fetch: Fetch, current: str, depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": task.id,
        "state": state_name(task),
        "goal": goal_of(task)[:80],
        "current": task.id == current,
        "children": [],
    }
    for d in delegations_of(task):
        if d.get("child") and depth < MAX_DEPTH:
            child = await fetch(str(d["child"]))
            if child is not None:
                node["children"].append(await _node(child, fetch, current, depth + 1))
                continue
        node["children"].append(
            {
                "peer": d.get("peer"),
                "id": d.get("remoteTask") or d.get("child"),
                "state": d.get("remoteState") or d.get("state"),
                "goal": str(d.get("goal") or "")[:80],
                "item": d.get("item"),
                "children": [],
            }
        )
    return node


def tree_view(node: dict[str, Any], tree: Tree | None = None) -> Tree:
    state = str(node.get("state") or "")
    label = Text.assemble(
        (f"peer {node['peer']}: " if node.get("peer") else "", "bold"),
        (str(node.get("id")), "bold reverse" if node.get("current") else "bold"),
        " ",
        (state, COLORS.get(state, "")),
        f"  {node.get('goal') or ''}",
    )
    branch = Tree(label) if tree is None else tree.add(label)
    for child in node.get("children") or []:
        tree_view(child, branch)
    return branch
