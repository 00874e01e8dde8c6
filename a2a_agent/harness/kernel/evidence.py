"""What each attempt at an item showed: kept per attempt, never overwritten by the next.

An item's `history` is a list of attempts, each {"attempt", "run" | "work", "verify",
"outcome"}; `run` and `verify` hold a command's evidence (command, exit code, duration, the
tail of its output, how many times it ran under its key, and `cannot_run` when the shell said
its program was not found or not executable: why, in `sandbox.cannot_run`'s words).
"""

from __future__ import annotations

from typing import Any

from a2a_agent.harness.kernel.results import JSON
from a2a_agent.harness.workspace.commands import CommandResult
from persistence.records import ItemRow


def evidence(result: CommandResult, runs: int = 1) -> JSON:
    shown: JSON = {
        "command": result.command,
        "exit_code": result.exit_code,
        "output_tail": result.output_tail,
        "duration_s": result.duration_s,
        "timed_out": result.timed_out,
        "runs": runs,
    }
    if result.cannot_run is not None:
        shown["cannot_run"] = result.cannot_run
    return shown


STATUS_OUTPUT_CHARS = 1500  # of a command's output tail, in a task's status text


def output_in_words(tail: str, *, fenced: bool = False, chars: int | None = None) -> str:
    """A command's output tail as the sentences after "`cmd` exited N." say it: "Output
    tail:" and its last `chars` characters (in a Markdown code block when `fenced`), or, when
    it printed nothing, that it did, rather than a heading with nothing under it."""
    shown = (tail if chars is None else tail[-chars:]).rstrip()
    if not shown.strip():
        return "It printed nothing."
    return f"Output tail:\n\n```\n{shown}\n```" if fenced else f"Output tail:\n{shown}"


def with_attempt(item: ItemRow, attempt: int, **fields: Any) -> list[JSON]:
    """The item's attempts, with attempt `attempt` given `fields` (added if it is new)."""
    history = [dict(entry) for entry in item.history]
    for entry in history:
        if entry.get("attempt") == attempt:
            entry.update(fields)
            return history
    return [*history, {"attempt": attempt, **fields}]
