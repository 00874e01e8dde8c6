"""Running fact checks: a fact's check command, run in the workspace; its output is the value."""

from __future__ import annotations

from collections.abc import Sequence

from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.results import JSON
from persistence.records import Fact

MAX_VALUE_CHARS = 1000
CHECK_TIMEOUT_S = 120


async def run_checks(
    ctx: StepContext, task_id: str, item_id: str, attempt: int, *, key: str, checks: Sequence[JSON]
) -> list[JSON]:
    """Run each {key, check} in the workspace: its output (trimmed) is the value."""
    found = []
    for check in checks:
        result = await ctx.run_in_workspace(
            task_id,
            str(check["check"]),
            item_id=item_id,
            attempt=attempt,
            key=key,
            timeout_s=min(CHECK_TIMEOUT_S, ctx.config.command_timeout_s),
            tail_bytes=MAX_VALUE_CHARS,
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
