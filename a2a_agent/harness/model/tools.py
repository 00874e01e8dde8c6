"""The workspace tools the model may call: bash, read_file, write_file, edit_file, list_files.

Paths are relative to the task's workspace and may not leave it or touch `.git`; the file
tools go through `safe_files` (no links followed, regular files only, capped reads). Every tool
returns text (capped) and whether it failed; the harness records both as the step's effect.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from a2a_agent.harness.workspace import safe_files
from a2a_agent.harness.workspace.commands import run_command
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.model.types import ToolSpec
from a2a_agent.slots import Slots

MAX_READ_BYTES = 200_000
T = TypeVar("T")
FACT_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_LIST_ENTRIES = 2000

TOOL_SPECS = [
    ToolSpec(
        "bash",
        "Run a shell command in the workspace (bash -c). Returns the exit code and "
        "the tail of stdout+stderr.",
        {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "timeout_s": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "kill the command after this long (default 120)",
                },
            },
            "required": ["command"],
        },
    ),
    ToolSpec(
        "read_file",
        "Read a text file of the workspace.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        "write_file",
        "Create or overwrite a file of the workspace with the given content.",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    ToolSpec(
        "edit_file",
        "Replace the one occurrence of old_string in a file with new_string "
        "(exact match; fails if it occurs zero or several times).",
        {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    ),
    ToolSpec(
        "list_files",
        "List the files of the workspace (or of a directory in it).",
        {"type": "object", "properties": {"path": {"type": "string"}}},
    ),
    ToolSpec(
        "record_fact",
        "Record a fact the rest of the run relies on (a version, an endpoint, a count). Give "
        "a shell command that prints its current value, and how old it may get: before any "
        "irreversible step the harness checks it again and asks a person if it changed.",
        {
            "type": "object",
            "properties": {
                "key": {"type": "string"},
                "value": {"type": "string"},
                "check": {"type": "string", "description": "prints the value when run"},
                "max_age_s": {"type": "integer", "minimum": 1},
            },
            "required": ["key", "value"],
        },
    ),
]
# Tools that ask a person: the harness pauses the run on them (model_work.py), they never
# reach WorkspaceTools.
ASKING_SPECS = [
    ToolSpec(
        "ask_person",
        "Ask the people you work for a question you cannot answer from the workspace. The run "
        "waits for the answer, which comes back as this tool's result.",
        {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    ),
    ToolSpec(
        "propose_plan_change",
        "Propose adding items to the plan (each with id, title, verify and optionally run), "
        "changing items not begun (id and any of title, run, verify, max_attempts) or removing "
        "items not done yet. Nothing changes until a person approves; the result says what "
        "they decided.",
        {
            "type": "object",
            "properties": {
                "add": {"type": "array", "items": {"type": "object"}},
                "change": {"type": "array", "items": {"type": "object"}},
                "remove": {"type": "array", "items": {"type": "string"}},
                "reason": {"type": "string"},
            },
            "required": ["reason"],
        },
    ),
]
ASKING_TOOLS = frozenset(t.name for t in ASKING_SPECS)
# Handing a chunk of work on (harness/delegation.py): the run waits for the delegate's report.
DELEGATE_SPEC = ToolSpec(
    "delegate",
    "Hand a large, self-contained chunk of work to a fresh agent (a child run of this "
    "service, or a peer agent named in `peer`) instead of doing it in this context: reading "
    "and searching a big codebase, or a sub-task with its own checks. Give a goal, and "
    "optionally a plan ({goal, items: [{id, title, verify, run?}]}), a budget slice "
    "({max_usd, max_tokens}) and share_workspace (the child works on a copy of this "
    "workspace). The run waits; the result is the delegate's report: its outcome, summary "
    "and each item's evidence, never its transcript. Your item's own check still decides.",
    {
        "type": "object",
        "properties": {
            "goal": {"type": "string"},
            "plan": {"type": "object"},
            "budget": {"type": "object"},
            "peer": {"type": "string"},
            "share_workspace": {"type": "boolean"},
        },
        "required": ["goal"],
    },
)
TOOL_NAMES = frozenset(t.name for t in TOOL_SPECS) | ASKING_TOOLS | {DELEGATE_SPEC.name}


@dataclass(frozen=True)
class ToolOutcome:
    content: str
    is_error: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error}


class ToolInputError(ValueError):
    """The model called a tool with input it cannot take; the message goes back to it."""


@dataclass(frozen=True)
class WorkspaceTools:
    root: Path
    env: Mapping[str, str]
    output_bytes: int
    max_timeout_s: int
    pid_file: Path | None = None
    sandbox: Sandbox = field(default_factory=Sandbox)
    slots: Slots | None = None  # the worker's command slots

    def _path(self, raw: Any, *, must_exist: bool = False) -> Path:
        if not isinstance(raw, str) or not raw.strip():
            raise ToolInputError("path must be a non-empty string")
        if "\x00" in raw:
            raise ToolInputError("path contains a NUL character; no file has such a name")
        root = self.root.resolve()
        path = (root / raw).resolve()
        if path != root and root not in path.parents:
            raise ToolInputError(f"{raw!r} is outside the workspace")
        if ".git" in path.relative_to(root).parts:
            raise ToolInputError("the .git directory is the harness's; leave it alone")
        if must_exist and not path.exists():
            raise ToolInputError(f"{raw!r} does not exist")
        return path

    @staticmethod
    async def _files(function: Callable[..., T], *args: Any) -> T:
        """A file operation in a thread (a slow disk or a huge file does not stall the
        server), its refusals as the tool's error."""
        try:
            return await asyncio.to_thread(function, *args)
        except safe_files.UnsafePath as exc:
            raise ToolInputError(str(exc)) from exc

    @staticmethod
    def _text(raw: Any, name: str) -> str:
        if not isinstance(raw, str):
            raise ToolInputError(f"{name} must be a string")
        return raw

    async def call(self, name: str, tool_input: Mapping[str, Any]) -> ToolOutcome:
        try:
            return await self._call(name, tool_input)
        except ToolInputError as exc:
            return ToolOutcome(f"error: {exc}", is_error=True)
        except OSError as exc:
            return ToolOutcome(f"error: {exc.strerror or exc}", is_error=True)

    async def _call(self, name: str, args: Mapping[str, Any]) -> ToolOutcome:
        if name == "bash":
            command = self._text(args.get("command"), "command")
            if "\x00" in command:
                raise ToolInputError("command contains a NUL character, which a shell cannot take")
            timeout = args.get("timeout_s", 120)
            if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
                raise ToolInputError("timeout_s must be a positive number")
            async with self.slots.hold() if self.slots is not None else nullcontext():
                result = await run_command(
                    command,
                    cwd=self.root,
                    env=self.env,
                    timeout_s=min(float(timeout), self.max_timeout_s),
                    tail_bytes=self.output_bytes,
                    sandbox=self.sandbox,
                    pid_file=self.pid_file,
                )
            return ToolOutcome(
                f"exit code {result.exit_code}\n{result.output_tail}", is_error=not result.passed
            )
        if name == "read_file":
            raw = self._text(args.get("path"), "path")
            data, more = await self._files(safe_files.read_capped, self.root, raw, MAX_READ_BYTES)
            text = data.decode("utf-8", errors="replace")
            if more:
                text += f"\n[a2a-agent: cut at {MAX_READ_BYTES} bytes; read the rest with bash]"
            return ToolOutcome(text)
        if name == "write_file":
            raw = self._text(args.get("path"), "path")
            content = self._text(args.get("content"), "content").encode()
            await self._files(safe_files.write_all, self.root, raw, content)
            return ToolOutcome(f"wrote {len(content)} bytes to {raw}")
        if name == "edit_file":
            raw = self._text(args.get("path"), "path")
            old = self._text(args.get("old_string"), "old_string")
            new = self._text(args.get("new_string"), "new_string")
            await self._files(safe_files.edit_once, self.root, raw, old, new)
            return ToolOutcome(f"edited {raw}")
        if name == "record_fact":
            key, value = self._text(args.get("key"), "key"), self._text(args.get("value"), "value")
            if not FACT_KEY.fullmatch(key):
                raise ToolInputError("key must be letters, digits, '.', '_' or '-' (at most 64)")
            check = args.get("check")
            if check is not None:
                self._text(check, "check")
            age = args.get("max_age_s")
            if age is not None and (isinstance(age, bool) or not isinstance(age, int) or age < 1):
                raise ToolInputError("max_age_s must be a whole number of seconds, 1 or more")
            return ToolOutcome(f"recorded fact {key} = {value[:200]!r}")
        if name == "list_files":
            base = self._path(args.get("path") or ".", must_exist=True)
            entries: list[str] = []
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if d != ".git")
                for filename in sorted(filenames):
                    entries.append(str((Path(dirpath) / filename).relative_to(self.root)))
                if len(entries) >= MAX_LIST_ENTRIES:
                    break
            return ToolOutcome("\n".join(entries[:MAX_LIST_ENTRIES]) or "(no files)")
        raise ToolInputError(f"there is no tool named {name!r}; use one of {sorted(TOOL_NAMES)}")
