"""Regressions: the checks of the items marked done, run again on the workspace as later work
left it.

A later item can break an earlier one, and the report would still say "6 of 6 done". After
the last item (and, with policy `reverify_every: N`, after every N items) a round runs every
done item's verify command again. Each check is a keyed effect of its own, keyed by the
checkpoint it checks (`<task>:<item>:<attempt>:reverify.<commit>`), so a crash re-runs only
the check in flight, and a later round at the same checkpoint reuses what was found. Checks
that declare themselves independent (read-only) run side by side, in lanes of their own.

An item whose check no longer passes is `regressed`. A bisect over the commits after the
item's own names the first at which its check fails, and so the item that broke it (each
probe a keyed effect too, run on a plain export of that commit inside `.git`; the item's own
commit and HEAD are probed first, so both ends are runs of that kind). Then the
policy `on_regression`: `reopen` (the item is worked again as a new attempt, at most
REOPEN_LIMIT times), `ask` (a `regression` request: reopen, skip or reject) or `fail`. The
round's outcome is one recorded step, keyed by the workflow segment and the round's number
in it (`<task>:task:reverify.s<segment>.<n>`), so a crash after it is recorded replays it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from a2a_agent.budget import Spend
from a2a_agent.harness.checks.regressions import REOPEN_LIMIT, Regression, reopened
from a2a_agent.harness.kernel.context import StepContext, ended_by_others
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.evidence import evidence
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.commands import CommandResult
from a2a_agent.harness.workspace.files import remove_within
from persistence.records import Charge, ItemRow, StepRecord, StepView, Transition
from persistence.views import reopenings

PROBES = "a2a-probe"  # inside .git: never committed, and the box can write there


def probe_folder(commit: str | None = None) -> str:
    """Where a probe's export of `commit` goes (without one: the folder of them all),
    relative to the workspace."""
    return f".git/{PROBES}" + (f"/{commit[:12]}" if commit else "")


def remove_probe(root: Path, commit: str | None = None) -> None:
    """A probe's export (without `commit`: every one) removed. The command a probe ran could
    have left a link on the way (`.git/a2a-probe -> /somewhere`); the harness, outside the
    box, walks from the workspace's descriptor and never deletes through one. What it cannot
    remove (a command took a folder's write bit away) stays inside `.git`, never committed:
    not worth failing the round for."""
    with contextlib.suppress(OSError):
        remove_within(root, probe_folder(commit))


@dataclass(frozen=True)
class Checked:
    """One done item's check, run again: what it gave and how many times it ran."""

    item: ItemRow
    result: CommandResult
    runs: int


class Reverification:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings

    async def reverify(self, task_id: str, round_id: str) -> StepResult:
        """Run every done item's check again; `round_id` names this round in the run."""
        key = effect_key(task_id, f"reverify.{round_id}")
        view = await self.ctx.view(task_id, key=key)
        if view.effect is not None and view.effect.status == "completed":
            return _recorded(view.effect.result or {})
        if view.is_terminal:
            return StepResult("stopped")
        done = [i for i in view.items if i.status == "done"]
        head = view.checkpoint_sha
        if not done or head is None:
            return StepResult.ok()
        ws = self.ctx.workspace(task_id)
        # The checkpoint must be here (another machine, a lost disk: rebuilt from bundles).
        # The tree is compared too, unless a check of a round was cut short here, which
        # re-runs on what it left, as any effect in flight does.
        lanes = range(self.ctx.config.reverify_parallelism + 1)
        in_flight = any(
            ":reverify." in (self.effects.marker(task_id, n).key() or "") for n in lanes
        )
        restored = await self.ctx.check_workspace(view, in_flight=in_flight)
        checked = await self._check_all(task_id, done, head)
        if isinstance(checked, StepResult):
            return checked
        failing = [c for c in checked if not c.result.passed]
        found: dict[str, JSON] = {}
        for c in failing:
            bisected = await self._bisect(task_id, view, c.item, head)
            if isinstance(bisected, StepResult):
                return bisected
            found[c.item.item_id] = bisected
        await asyncio.to_thread(remove_probe, ws.root)
        view = await self.ctx.view(task_id, key=key, budget=True)
        if view.is_terminal:
            return StepResult("stopped")
        regression = Regression(
            view=view,
            key=key,
            round_id=round_id,
            head=head,
            checked=[(c.item.item_id, evidence(c.result, c.runs)) for c in checked],
            found=found,
            restored=restored,
        )
        record, result = await self._conclude(regression)
        outcome = await self.ctx.record(view, record)
        if result.outcome == "failed":
            self.ctx.forget(task_id)
        if ended_by_others(record, outcome):
            return StepResult("stopped")
        return result

    # ---- running the checks ---------------------------------------------------------------

    async def _check_all(
        self, task_id: str, done: Sequence[ItemRow], head: str
    ) -> list[Checked] | StepResult:
        """Each done item's check, once per checkpoint: independent ones side by side (lane n
        takes every n-th of them, so a lane's order never changes), the others one at a
        time, in plan order, after them."""
        parallel = self.ctx.config.reverify_parallelism
        side = [i for i in done if i.verify_independent] if parallel > 1 else []
        alone = [i for i in done if i not in side]
        found: dict[str, Checked] = {}
        stopped: list[StepResult] = []

        async def lane(n: int, items: Sequence[ItemRow]) -> None:
            for item in items:
                if stopped:
                    return
                got = await self._check(task_id, item, head, n)
                if isinstance(got, StepResult):
                    stopped.append(got)
                    return
                found[item.item_id] = got

        if side:
            async with asyncio.TaskGroup() as group:
                for n in range(parallel):
                    if side[n::parallel]:
                        group.create_task(lane(n + 1, side[n::parallel]))
        await lane(0, alone)
        if stopped:
            return stopped[0]
        return [found[i.item_id] for i in done]

    async def _check(
        self, task_id: str, item: ItemRow, head: str, lane: int
    ) -> Checked | StepResult:
        key = effect_key(
            task_id, f"reverify.{head[:12]}", scope=item.item_id, attempt=item.attempts
        )
        got = await self._command(task_id, item, key, "reverify", lane=lane)
        if isinstance(got, StepResult):
            return got
        return Checked(item, *got)

    async def _command(
        self,
        task_id: str,
        item: ItemRow,
        key: str,
        step: str,
        *,
        lane: int = 0,
        commit: str | None = None,
    ) -> tuple[CommandResult, int] | StepResult:
        """The item's verify command as a keyed effect: in the workspace, or (`commit`) in a
        plain export of that commit. Its record is the effect alone (no transition)."""
        view = await self.ctx.view(task_id, key=key, budget=True)
        effect = Effect(
            key=key,
            step=step,
            item_id=item.item_id,
            attempt=item.attempts,
            spend=Spend(),
            integrity="none",
            lane=lane,
        )

        async def perform() -> JSON:
            where, ws = None, self.ctx.workspace(task_id)
            if commit is not None:
                where = ws.root / probe_folder(commit)
                await ws.export(commit, where)
            try:
                result = await self.ctx.run_in_workspace(
                    task_id,
                    item.verify_command,
                    item_id=item.item_id,
                    attempt=item.attempts,
                    key=key,
                    timeout_s=item.verify_timeout_s,
                    lane=lane,
                    cwd=where,
                )
            finally:
                if commit is not None:
                    await asyncio.to_thread(remove_probe, ws.root, commit)
            return {"command": result.as_json()}

        async def conclude(value: JSON, runs: int) -> Concluded:
            record = StepRecord(
                effect_key=key,
                step=step,
                result=value,
                runs=runs,
                charge=Charge(kind="command"),
                item_id=item.item_id,
                attempt=item.attempts,
            )
            payload = {"command": value["command"], "runs": runs}
            return Concluded(record, StepResult.ok(payload), fingerprint=False)

        done = await self.effects.run(view, effect, perform, conclude)
        if done.outcome != "ok":
            return done
        return CommandResult.from_json(done.payload["command"]), int(done.payload["runs"])

    # ---- who broke it ---------------------------------------------------------------------

    async def _bisect(
        self, task_id: str, view: StepView, item: ItemRow, head: str
    ) -> JSON | StepResult:
        """The first commit after the item's own at which its check fails, and the item that
        made it; or why that cannot be told."""
        ws = self.ctx.workspace(task_id)
        own = item.commit_sha
        after = await ws.commits_after(own, head) if own else None
        if own is None or not after:
            return {"found": False, "why": "its own commit is not in the history it was run on"}
        probes: list[JSON] = []

        async def probe(sha: str) -> bool | StepResult:
            key = effect_key(
                task_id, f"probe.{sha[:12]}", scope=item.item_id, attempt=item.attempts
            )
            got = await self._command(task_id, item, key, "probe", commit=sha)
            if isinstance(got, StepResult):
                return got
            result, runs = got
            probes.append({"commit": sha, "exit_code": result.exit_code, "runs": runs})
            return result.passed

        passed = await probe(own)
        if isinstance(passed, StepResult):
            return passed
        if not passed:
            return {
                "found": False,
                "why": f"its check fails at its own commit {own[:12]} too, so no later item "
                "broke it (the check or what it depends on outside the workspace changed)",
                "probes": probes,
            }
        # The round's failure at HEAD was a run in the workspace (with what no commit holds,
        # beside other checks), the probes' runs on plain exports: HEAD is probed too, so the
        # bisect's two ends are the same kind of run and a check that fails only in the
        # workspace (a timeout under load, an untracked file) is not blamed on the last item.
        passed = await probe(head)
        if isinstance(passed, StepResult):
            return passed
        if passed:
            return {
                "found": False,
                "why": f"its check passes on a plain export of {head[:12]}, the commit it "
                "failed at, so no commit broke it: it failed in the workspace as it was (a "
                "timeout, or files no commit holds)",
                "probes": probes,
            }
        good, bad = -1, len(after) - 1  # passes at `own` (good = -1), fails at head
        while bad - good > 1:
            middle = (good + bad) // 2
            passed = await probe(after[middle])
            if isinstance(passed, StepResult):
                return passed
            good, bad = (middle, bad) if passed else (good, middle)
        first = after[bad]
        culprit = _item_of(await ws.commit_key(first), task_id)
        title = next((i.title for i in view.items if i.item_id == culprit), None)
        return {
            "found": True,
            "commit": first,
            "item": culprit,
            "title": title,
            "probes": probes,
        }

    # ---- the round's record -----------------------------------------------------------------

    async def _conclude(self, found: Regression) -> tuple[StepRecord, StepResult]:
        view = found.view
        regressed = found.regressed_items()
        if not regressed:
            return found.passed_record(), StepResult.ok()
        policy = str(view.policy.get("on_regression", "ask"))
        worn = [i for i in regressed if reopenings(i) >= REOPEN_LIMIT]
        if policy == "ask":
            request = self.effects.pauses.request(
                view,
                pause_id=f"regression.{found.round_id}",
                kind="regression",
                summary=found.summary() + " Reopen the item(s) for a new attempt, skip them, "
                "or reject (the run fails).",
                details={"items": found.shown()},
            )
            record = found.regressed_record(
                task_state="input_required",
                status_text=self.effects.pauses.status_text(request),
                extra=[self.effects.pauses.transition(request)],
                pause=request,
                outcome="paused",
            )
            return record, StepResult("paused", 0, {"pause": request.id})
        if policy == "reopen" and not worn:
            histories = found.histories()
            changes = [
                reopened(item, histories[item.item_id], found.reason_of(item), found.round_id)
                for item in regressed
            ]
            record = found.regressed_record(
                reopen=changes,
                outcome="retry",
                extra=[
                    Transition(
                        item_id=c.item_id,
                        attempt=c.attempts + 1,
                        from_state="regressed",
                        to_state="pending",
                        reason=f"reopened for attempt {c.attempts + 1} (policy onRegression: "
                        "reopen)",
                    )
                    for c in changes
                ],
            )
            return record, StepResult("retry")
        why = found.summary()
        if worn and policy == "reopen":
            names = ", ".join(i.item_id for i in worn)
            why += f" {names} regressed again after {REOPEN_LIMIT} reopenings."
        record = found.regressed_record(
            task_state="failed",
            status_text=f"Not completed: {why}",
            extra=[Transition(from_state="working", to_state="failed", reason=why[:500])],
            outcome="failed",
        )
        after = dataclasses.replace(view, items=found.items_after(record))
        record = dataclasses.replace(record, report=await self.endings.report(after))
        record = await self.endings.closing_record(view, record, after.items)
        return record, StepResult("failed")


def _recorded(result: JSON) -> StepResult:
    outcome = str(result.get("outcome", "ok"))
    if outcome in ("ok", "retry", "failed", "paused"):
        return StepResult(outcome)  # type: ignore[arg-type]
    return StepResult.ok()


def _item_of(key: str | None, task_id: str) -> str | None:
    """The item whose verified commit carries idempotency key `key` (<task>:<item>:<n>:verify)."""
    if key is None or not key.startswith(f"{task_id}:"):
        return None
    parts = key[len(task_id) + 1 :].rsplit(":", 2)
    if len(parts) == 3 and parts[2] == "verify":
        return parts[0]
    return None
