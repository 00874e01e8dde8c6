"""The step context: what every step of the plan and of the model needs, in one object.

The store's run side, the ledger, the budget guard, the workspace, the command environment,
recording a step (fingerprint, one transaction, the files rendered from what it returned)
and restarting an item. Plan steps, model steps, effects and run endings all take this.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from a2a_agent.budget import BudgetGuard
from a2a_agent.harness.integrity import check_workspace
from a2a_agent.harness.keys import effect_key
from a2a_agent.harness.render import plan_document, progress_document
from a2a_agent.harness.results import StepResult
from a2a_agent.harness.workspace import Workspace
from persistence.ledger import Ledger
from persistence.records import (
    TERMINAL_STATES,
    EffectStart,
    ItemChange,
    ItemRow,
    StepOutcome,
    StepRecord,
    StepView,
    Transition,
    TransitionRow,
)
from persistence.runs import RunStore

CACHED_TASKS = 1000


@dataclass(frozen=True)
class HarnessConfig:
    workspaces: Path
    command_env: Mapping[str, str]
    command_timeout_s: int
    output_tail_bytes: int
    executor_id: str
    git_timeout_s: float = 600.0


def ended_by_others(record: StepRecord, outcome: StepOutcome) -> bool:
    """The task is terminal, and not because of this record (canceled, or stopped while the
    step ran): the run must stop here."""
    return outcome.task_state in TERMINAL_STATES and record.task_state != outcome.task_state


class StepContext:
    def __init__(
        self, runs: RunStore, ledger: Ledger, guard: BudgetGuard, config: HarnessConfig
    ) -> None:
        self.runs = runs
        self.ledger = ledger
        self.guard = guard
        self.config = config
        # Each task's transitions as last rendered: a step appends what it wrote instead of
        # reading them all again.
        self._transitions: OrderedDict[str, list[TransitionRow]] = OrderedDict()

    def workspace(self, task_id: str) -> Workspace:
        return Workspace(self.config.workspaces / task_id, git_timeout_s=self.config.git_timeout_s)

    def marker_path(self, task_id: str) -> Path:
        return self.config.workspaces / ".effects" / f"{task_id}.json"

    async def view(self, task_id: str, *, key: str | None = None, budget: bool = False) -> StepView:
        return await self.runs.view(task_id, effect_key=key, budget=budget)

    def command_env(
        self, task_id: str, item_id: str, attempt: int, key: str, root: Path
    ) -> dict[str, str]:
        """What every command sees: the settings' small environment and the step's key."""
        return {
            **self.config.command_env,
            "A2A_TASK_ID": task_id,
            "A2A_ITEM_ID": item_id,
            "A2A_ATTEMPT": str(attempt),
            "A2A_IDEMPOTENCY_KEY": key,
            "A2A_WORKSPACE": str(root),
        }

    async def check_workspace(
        self, view: StepView, *, in_flight: bool = False, compare_tree: bool = True
    ) -> str | None:
        return await check_workspace(
            self.runs,
            self.workspace(view.task_id),
            view,
            in_flight=in_flight,
            compare_tree=compare_tree,
        )

    # ---- recording ----------------------------------------------------------------------

    async def record(
        self, view: StepView, record: StepRecord, *, fingerprint: bool = True
    ) -> StepOutcome:
        """Record a step in one transaction (with the workspace's fingerprint, unless the step
        does not change the workspace), then render the files from what it returned."""
        if fingerprint:
            found = await self.workspace(view.task_id).fingerprint()
            record = dataclasses.replace(record, fingerprint=found)
        outcome = await self.runs.record_step(view.task_id, record)
        if outcome.replayed or record.changes_files:
            transitions = await self._after(view.task_id, outcome)
            self._write(view.task_id, view.goal, outcome.items, transitions)
        return outcome

    async def render(
        self, view: StepView, items: Sequence[ItemRow], pending: Sequence[Transition] = ()
    ) -> None:
        """Write plan.json and progress.md as they will be once `pending` is recorded (a
        verified item's commit holds its own `done`)."""
        transitions = await self._cached(view.task_id)
        self._write(view.task_id, view.goal, items, [*transitions, *pending])

    def _write(
        self,
        task_id: str,
        goal: str,
        items: Sequence[ItemRow],
        transitions: Sequence[TransitionRow | Transition],
    ) -> None:
        self.workspace(task_id).write_files(
            plan_document(task_id, goal, items),
            progress_document(task_id, goal, items, transitions),
        )

    async def _cached(self, task_id: str) -> list[TransitionRow]:
        cached = self._transitions.get(task_id)
        if cached is None:
            cached = await self.runs.transitions(task_id)
            self._remember(task_id, cached)
        else:
            self._transitions.move_to_end(task_id)
        return cached

    async def _after(self, task_id: str, outcome: StepOutcome) -> list[TransitionRow]:
        cached = self._transitions.get(task_id)
        new = outcome.transitions
        contiguous = (
            cached is not None
            and not outcome.replayed
            and (not new or (cached[-1].seq if cached else 0) + 1 == new[0].seq)
        )
        if cached is not None and contiguous:
            cached.extend(new)
            self._transitions.move_to_end(task_id)
            return cached
        fresh = await self.runs.transitions(task_id)
        self._remember(task_id, fresh)
        return fresh

    def _remember(self, task_id: str, transitions: list[TransitionRow]) -> None:
        self._transitions[task_id] = transitions
        self._transitions.move_to_end(task_id)
        while len(self._transitions) > CACHED_TASKS:
            self._transitions.popitem(last=False)

    def forget(self, task_id: str) -> None:
        """The run ended here: its cached rows are no longer needed."""
        self._transitions.pop(task_id, None)

    # ---- restarting an item -------------------------------------------------------------

    def first_effect(self, task_id: str, item: ItemRow, attempt: int) -> EffectStart | None:
        """The effect an attempt at `item` begins with, when the harness knows it (a `run`
        command); a model's first call is marked by its own step."""
        if item.run is None:
            return None
        key = effect_key(task_id, "run", scope=item.item_id, attempt=attempt)
        return EffectStart(key=key, step="run", item_id=item.item_id, attempt=attempt)

    async def restart(self, view: StepView, item: ItemRow, attempt: int, why: str) -> StepResult:
        """The workspace was restored: record that, and work the item again as a new attempt."""
        record = StepRecord(
            effect_key=effect_key(view.task_id, "restore", scope=item.item_id, attempt=attempt),
            step="restore",
            result={},
            item=ItemChange(item_id=item.item_id, status="in_progress", attempts=attempt + 1),
            transitions=[
                Transition(
                    item_id=item.item_id,
                    attempt=attempt + 1,
                    from_state=item.status,
                    to_state="in_progress",
                    reason=f"{why}; restarting the item as attempt {attempt + 1}",
                )
            ],
            then=self.first_effect(view.task_id, item, attempt + 1),
        )
        outcome = await self.record(view, record)
        if ended_by_others(record, outcome):
            return StepResult("stopped", attempt)
        return StepResult("restart", attempt + 1)
