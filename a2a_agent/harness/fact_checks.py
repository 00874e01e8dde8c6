"""Running fact checks: a fact's check command, run in the workspace; its output is the value."""

from __future__ import annotations

from collections.abc import Sequence

from a2a_agent.harness.commands import run_command
from a2a_agent.harness.context import StepContext
from a2a_agent.harness.results import JSON
from persistence.records import Fact

MAX_VALUE_CHARS = 1000
CHECK_TIMEOUT_S = 120


async def run_checks(
    ctx: StepContext, task_id: str, item_id: str, attempt: int, *, key: str, checks: Sequence[JSON]
) -> list[JSON]:
    """Run each {key, check} in the workspace: its output (trimmed) is the value."""
    ws = ctx.workspace(task_id)
    found = []
    for check in checks:
        result = await run_command(
            str(check["check"]),
            cwd=ws.root,
            env=ctx.command_env(task_id, item_id, attempt, key, ws.root),
            timeout_s=min(CHECK_TIMEOUT_S, ctx.config.command_timeout_s),
            tail_bytes=MAX_VALUE_CHARS,
            sandbox=ctx.config.sandbox,
            pid_file=ws.command_pid_file,
        )
        found.append(
            {**check, "value": result.output_tail.strip()[:MAX_VALUE_CHARS],
             "exit_code": result.exit_code}
        )  # fmt: skip
    return found


def as_fact(check: JSON, source: str) -> Fact:
    return Fact(
        key=str(check["key"]),
        value=str(check["value"]),
        source=source,
        check=check.get("check"),
        max_age_s=check.get("max_age_s"),
    )
