"""What the model is told: system prompts, the plan tool, an item's context, compaction.

Everything here is a pure function of its inputs, so the workflow body can build messages
from step outputs and replay them identically.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a_agent.harness.kernel.evidence import output_in_words
from a2a_agent.model.types import JSON, ToolSpec, user_text
from persistence.records import ItemRow

KEPT_RESULT_CHARS = 1000

PLANNER_SYSTEM = """\
You plan work for an autonomous software agent that works in a git repository, one item at a \
time. Break the goal into a short sequence of items (usually 1 to 8). Every item needs a \
`verify` shell command that exits 0 if and only if the item is done; the harness, not you, \
runs it before the item's work (it must fail then), after it, and again once later items \
are done (it must still pass), so make it a real check (tests, a grep, a build), never \
`true`. Give the plan an end-to-end `verify` when the goal allows. Item ids are short \
slugs. Give an item a `run` command only if a fixed shell command \
does its whole work; otherwise the agent will work it with tools. Submit the plan with the \
submit_plan tool."""

WORKER_SYSTEM = """\
You are an autonomous software agent working ONE item of a plan in a git repository (the \
current directory of every tool). Use the tools to do the item's work: read before you \
edit, keep changes small, run the checks you need. The harness runs the item's verify \
command after your turn and only its exit code decides whether the item is done; claiming \
success does not make it so. Do not edit plan.json or progress.md (the harness writes them) \
and do not touch .git. When the item's work is done, stop calling tools and reply with a \
short progress entry: what you did, what you checked, anything left open."""

COMPACT_SYSTEM = """\
You compress the transcript of an agent's work on one item so it can continue in a fresh \
context. Keep every decision and its reason, every file created or changed (with what \
changed), commands that failed and why, and open questions. Drop tool output that is no \
longer needed. Answer with the summary only."""

PLAN_ITEM_SCHEMA: JSON = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "short slug, unique in the plan"},
        "title": {"type": "string"},
        "verify": {
            "description": "shell command; exit code 0 means done",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "object",
                    "properties": {
                        "command": {"type": "string"},
                        "timeout_s": {"type": "integer"},
                        "independent": {
                            "type": "boolean",
                            "description": "the check only reads the workspace",
                        },
                    },
                    "required": ["command"],
                },
            ],
        },
        "max_attempts": {"type": "integer", "minimum": 1},
        "run": {"type": "string", "description": "only if a fixed command does all the work"},
    },
    "required": ["id", "title", "verify"],
}

SUBMIT_PLAN = ToolSpec(
    "submit_plan",
    "Submit the plan: the goal and its items in order, each with a verify command.",
    {
        "type": "object",
        "properties": {
            "goal": {"type": "string"},
            "items": {"type": "array", "items": PLAN_ITEM_SCHEMA},
            "verify": {
                "type": "string",
                "description": "an end-to-end check of the whole goal, run after the last "
                "item (the project builds and its tests pass, say); give one when the goal "
                "allows",
            },
        },
        "required": ["goal", "items"],
    },
)


def planning_messages(goal: str, repository: str = "") -> list[JSON]:
    text = f"The goal, from the person or agent who delegated it:\n\n{goal}"
    return [user_text(f"{text}\n\n{repository}" if repository else text)]


def _plan_lines(items: Sequence[ItemRow], current: str) -> list[str]:
    lines = []
    for i in items:
        marker = " <- this item" if i.item_id == current else ""
        lines.append(
            f"- [{i.status}] {i.item_id}: {i.title} (verify: `{i.verify_command}`){marker}"
        )
    return lines


def item_messages(
    *,
    goal: str,
    items: Sequence[ItemRow],
    item: ItemRow,
    attempt: int,
    progress_tail: str,
    last_failure: JSON | None,
    notes: Sequence[str] = (),
    repository: str = "",
) -> list[JSON]:
    """A fresh context for one attempt at an item: built from files and rows, not history."""
    parts = [
        f"# Goal\n{goal}",
        *([repository] if repository else []),
        "# Plan\n" + "\n".join(_plan_lines(items, item.item_id)),
        f"# Recent progress (tail of progress.md)\n{progress_tail.strip() or '(none yet)'}",
        f"# Your item: {item.item_id} (attempt {attempt} of {item.max_attempts})\n{item.title}\n"
        f"It is done when `{item.verify_command}` exits 0.",
    ]
    if last_failure:
        parts.append(
            "# The last verification failed\n"
            f"`{last_failure.get('command')}` exited {last_failure.get('exit_code')}. "
            + output_in_words(str(last_failure.get("output_tail", "")), fenced=True)
        )
    if notes:
        parts.append(
            "# Notes from the people you work for (follow them)\n"
            + "\n".join(f"- {note}" for note in notes)
        )
    return [user_text("\n\n".join(parts))]


def compaction_messages(messages: Sequence[JSON]) -> list[JSON]:
    transcript = json.dumps(list(messages[1:]), ensure_ascii=False)
    return [
        user_text(
            f"{_first_text(messages)}\n\n# Transcript of the work so far (JSON)\n"
            f"{transcript}\n\nSummarize it as instructed."
        )
    ]


def _first_text(messages: Sequence[JSON]) -> str:
    content: Any = messages[0]["content"]
    return "\n".join(b["text"] for b in content if b.get("type") == "text")


def compacted(messages: Sequence[JSON], summary: str) -> list[JSON]:
    """The first (context) message with the summary appended, plus the last exchange.

    The last exchange is an assistant message with tool uses and the user message with
    their results, so the conversation stays valid and the model sees its latest results.
    """
    first = user_text(
        f"{_first_text(messages)}\n\n# Your work on this item so far (summarized)\n{summary}"
    )
    return [first, messages[-2], _trimmed_results(messages[-1])]


def _trimmed_results(message: JSON, keep: int = KEPT_RESULT_CHARS) -> JSON:
    """The latest tool results, each cut to its tail: the summary holds what came before."""
    blocks = []
    for block in message["content"]:
        content = block.get("content")
        if block.get("type") == "tool_result" and isinstance(content, str) and len(content) > keep:
            blocks.append({**block, "content": f"[earlier output cut]\n{content[-keep:]}"})
        else:
            blocks.append(block)
    return {**message, "content": blocks}


def estimated_tokens(messages: Sequence[JSON]) -> int:
    return len(json.dumps(list(messages), ensure_ascii=False)) // 4
