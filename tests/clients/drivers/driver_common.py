"""Shared by every driver script (stdlib only: it runs in each client's own environment).

A driver reads its arguments as JSON on stdin, runs the scenarios asked for, each guarded so
one failure does not hide the others, and writes the results as JSON to the file named by
`DRIVER_RESULT_FILE` at the end. A file, not stdout: frameworks print from threads of their
own (CrewAI's polling panels), and such a print once landed in the middle of a result line.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

QUESTION = "What should it be called?"
ANSWER = "Call it Heron."


def args() -> dict[str, Any]:
    return dict(json.load(sys.stdin))


def quick_plan(tag: str) -> dict[str, Any]:
    """Two items that pass at once; each becomes a commit."""
    return {
        "plan": {
            "goal": f"quick {tag}",
            "items": [
                {
                    "id": "one",
                    "title": "Write one.txt",
                    "run": "echo one > one.txt",
                    "verify": "grep -q one one.txt",
                },
                {
                    "id": "two",
                    "title": "Write two.txt",
                    "run": "echo two > two.txt",
                    "verify": "grep -q two two.txt",
                },
            ],
        }
    }


def slow_plan(tag: str, seconds: float = 120) -> dict[str, Any]:
    """One item whose command runs `seconds` (to cancel it, or to outlast a client's timeout)."""
    return {
        "plan": {
            "goal": f"slow {tag}",
            "items": [
                {
                    "id": "slow",
                    "title": f"Work {seconds:.0f} s",
                    "run": {
                        "command": f"sleep {seconds:.0f}; echo done > slow.txt",
                        "timeoutS": int(seconds) + 60,
                    },
                    "verify": "grep -q done slow.txt",
                }
            ],
        }
    }


def ask_plan(tag: str) -> dict[str, Any]:
    """A question item (the task turns input-required), then an item that uses the answer."""
    return {
        "plan": {
            "goal": f"ask {tag}",
            "items": [
                {"id": "name", "title": "Pick a name", "ask": QUESTION},
                {
                    "id": "use",
                    "title": "Use the name",
                    "run": "cp answers/name.md name.txt",
                    "verify": "grep -q Heron name.txt",
                },
            ],
        }
    }


def message_id() -> str:
    return str(uuid.uuid4())


def short(value: object, limit: int = 600) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."


def run(scenarios: dict[str, Callable[[], Awaitable[dict[str, Any]]]], wanted: list[str]) -> None:
    """Run the wanted scenarios side by side and print the result line."""

    async def one(name: str) -> dict[str, Any]:
        started = time.monotonic()
        try:
            found = dict(await scenarios[name]())
        except Exception as e:  # noqa: BLE001 - every failure is the result
            found = {
                "error": f"{type(e).__module__}.{type(e).__name__}: {short(e, 1500)}",
                "trace": traceback.format_exc()[-3000:],
            }
        found["seconds"] = round(time.monotonic() - started, 2)
        return found

    async def main() -> dict[str, Any]:
        # The scenarios are independent tasks of their own: run side by side.
        done = await asyncio.gather(*(one(name) for name in wanted))
        return dict(zip(wanted, done, strict=True))

    results = asyncio.run(main())
    with open(os.environ["DRIVER_RESULT_FILE"], "w", encoding="utf-8") as out:
        json.dump(results, out, default=str)
