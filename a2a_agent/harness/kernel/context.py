"""The step context: what every step of the plan and of the model needs, in one object.

The store's run side, the ledger, the budget guard, the workspace, the command environment,
recording a step (fingerprint, one transaction, the files rendered from what it returned)
and restarting an item. Plan steps, model steps, effects and run endings all take this.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from a2a_agent.budget import BudgetGuard
from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.integrity import check_workspace
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.render import (
    ItemLines,
    plan_document,
    progress_document,
    transition_line,
)
from a2a_agent.harness.kernel.results import StepResult
from a2a_agent.harness.workspace.commands import CommandResult, run_command
from a2a_agent.harness.workspace.git_remote import GitRemote
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.unpack import Limits
from a2a_agent.harness.workspace.workspace import Workspace
from a2a_agent.slots import Slots, StepSlots
from a2a_agent.sources import SourceRules
from persistence.ledger import Ledger
from persistence.records import (
    TERMINAL_STATES,
    Checkpoint,
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
from persistence.steps import keep_waiting

CACHED_TASKS = 1000


@dataclass(frozen=True)
class HarnessConfig:
    workspaces: Path
    command_env: Mapping[str, str]
    command_timeout_s: int
    output_tail_bytes: int
    executor_id: str
    git_timeout_s: float = 600.0
    reverify_parallelism: int = 4  # independent checks re-verified side by side
    # Fetches a caller's repository (and its start commit again, when a disk is lost) and
    # pushes to the caller's branch.
    remote: GitRemote = field(default_factory=lambda: GitRemote(SourceRules(), Sandbox()))
    unpack: Limits = field(default_factory=lambda: Limits(max_files=5000, max_bytes=512 << 20))
    max_download_bytes: int = 32 << 20  # a file the message gives by URL
    public_url: str = "http://127.0.0.1:8000"  # the outputs' URLs start with it
    inline_output_bytes: int = 64 * 1024  # a result file this small travels in its artifact
    fault_file: Path | None = None  # tests: where a crash point is named (watched.py)
    sandbox: Sandbox = field(default_factory=Sandbox)
    # Commands running at once in this worker, whichever runs they belong to (the model's
    # bash included): what the cores allow, while runs waiting on the model take none.
    command_slots: Slots = field(default_factory=lambda: Slots("commands", 8))
    # Steps doing their own work at once (not waiting on their effects), of all runs.
    step_slots: StepSlots = field(default_factory=lambda: StepSlots(8))


class _Entries:
    """A task's transitions as progress.md entries, and the last one's sequence number."""

    def __init__(self) -> None:
        self.seq = 0
        self.lines: list[str] = []

    def add(self, transitions: Sequence[TransitionRow]) -> None:
        for t in transitions:
            self.lines.append(transition_line(t))
            self.seq = t.seq


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
        # Each task's progress entries as last rendered: a step appends what it wrote instead
        # of reading (and rendering) every transition again.
        self._rendered: OrderedDict[str, _Entries] = OrderedDict()
        # Each task's items after the last record made from a view: a second record from the
        # same view changes them, not the rows that view read (one segment of a task runs
        # at a time, and only its steps change its items).
        self._recorded: OrderedDict[str, tuple[StepView, list[ItemRow]]] = OrderedDict()
        # Each task's plan.json lines as last written: a step makes only its items' again.
        self._lines: OrderedDict[str, ItemLines] = OrderedDict()

    def workspace(self, task_id: str) -> Workspace:
        return Workspace(
            self.config.workspaces / task_id,
            git_timeout_s=self.config.git_timeout_s,
            sandbox=self.config.sandbox if self.config.sandbox.enabled else None,
        )

    def marker_path(self, task_id: str, lane: int = 0) -> Path:
        name = task_id if lane == 0 else f"{task_id}.{lane}"
        return self.config.workspaces / ".effects" / f"{name}.json"

    async def view(self, task_id: str, *, key: str | None = None, budget: bool = False) -> StepView:
        return await self.runs.view(task_id, effect_key=key, budget=budget)

    async def run_in_workspace(
        self,
        task_id: str,
        command: str,
        *,
        item_id: str,
        attempt: int,
        key: str,
        timeout_s: float,
        tail_bytes: int | None = None,
        lane: int = 0,
        cwd: Path | None = None,
    ) -> CommandResult:
        """Run a harness command (a run, a verify, a check) as every one runs: in the task's
        workspace (or `cwd`, a checkout inside it) and sandbox, with the step's key in its
        environment, its process group noted so a worker that dies leaves nothing running
        (commands run side by side note theirs in their own `lane`)."""
        ws = self.workspace(task_id)
        # One of the worker's command slots, held while it runs (its timeout counts from
        # its start, not from the wait); the step's own slot is free meanwhile.
        async with self.config.step_slots.aside(), self.config.command_slots.hold():
            return await run_command(
                command,
                cwd=cwd or ws.root,
                env=self.command_env(task_id, item_id, attempt, key, ws.root),
                timeout_s=timeout_s,
                tail_bytes=tail_bytes or self.config.output_tail_bytes,
                sandbox=self.config.sandbox,
                pid_file=ws.lane_pid_file(lane),
            )

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
            remote=self.config.remote,
        )

    # ---- recording ----------------------------------------------------------------------

    async def record(
        self,
        view: StepView,
        record: StepRecord,
        *,
        fingerprint: bool = True,
        found: str | None = None,
    ) -> StepOutcome:
        """Record a step in one transaction (with the workspace's fingerprint, unless the step
        does not change the workspace; `found` if the step just took it), then render the
        files from what the record returned."""
        await keep_waiting()  # the last step's, unless this step's view read kept it
        if fingerprint:
            found = found or await self.workspace(view.task_id).fingerprint()
            record = dataclasses.replace(record, fingerprint=found)
        if record.started_at is None:
            record = dataclasses.replace(record, started_at=view.read_at)
        read = self._recorded.get(view.task_id)
        items = read[1] if read is not None and read[0] is view else list(view.items)
        outcome = await self.runs.record_step(view.task_id, record, items)
        after = outcome.items or items
        if not outcome.replayed:
            self._recorded[view.task_id] = (view, after)
            self._recorded.move_to_end(view.task_id)
            while len(self._recorded) > CACHED_TASKS:
                self._recorded.popitem(last=False)
        if outcome.replayed or record.changes_files:
            entries = await self._entries_after(view.task_id, outcome)
            self._write(view.task_id, view.goal, after, entries)
        return outcome

    async def advance(self, view: StepView, record: StepRecord, attempt: int = 0) -> StepResult:
        """Record a step that only moves the run on: `ok`, or `stopped` if the task ended
        meanwhile (canceled, stopped by others)."""
        outcome = await self.record(view, record)
        if ended_by_others(record, outcome):
            return StepResult("stopped", attempt)
        return StepResult.ok(attempt=attempt)

    async def commit(
        self,
        view: StepView,
        items: Sequence[ItemRow],
        pending: Sequence[Transition],
        *,
        key: str,
        message: str,
        read: tuple[str, ...] = (),
    ) -> tuple[Checkpoint | None, bytes | None]:
        """Commit the workspace with plan.json and progress.md as they will be once `pending`
        is recorded (each transition with its `from_state` and `at` set, so the files the
        record renders afterwards are the same); the new checkpoint, if HEAD moved. A lost
        workspace is not committed (its restore brings the files back). With `read` (a script
        that only reads, and its arguments), that runs after the commit in the same box: also
        what it printed, None where it did not run (no workspace, or the commit was made
        before: `Workspace.commit_then_read`)."""
        await keep_waiting()  # the last step's, unless this step's view read kept it
        ws = self.workspace(view.task_id)
        if not ws.git_dir.is_dir():
            return None, None
        # A step that runs again after a kill -9 in its own commit (the run's closing one
        # included) finds that git's lock: one step of one segment works a workspace at a
        # time, and its commands have ended, so a lock here is a dead process's.
        ws.clear_stale_locks()
        await self.render(view, items, pending)
        sha, bundle, printed = await ws.commit_then_read(message, key, view.checkpoint_sha, read)
        return (Checkpoint(sha=sha, bundle=bundle) if bundle is not None else None), printed

    async def render(
        self, view: StepView, items: Sequence[ItemRow], pending: Sequence[Transition] = ()
    ) -> None:
        """Write plan.json and progress.md as they will be once `pending` is recorded (a
        verified item's commit holds its own `done`)."""
        rendered = await self._entries(view.task_id, view.transition_seq)
        entries = [*rendered.lines, *(transition_line(t) for t in pending)]
        self._write(view.task_id, view.goal, items, entries)

    def _write(
        self, task_id: str, goal: str, items: Sequence[ItemRow], entries: Sequence[str]
    ) -> None:
        lines = self._lines.pop(task_id, None) or ItemLines()
        self._lines[task_id] = lines
        while len(self._lines) > CACHED_TASKS:
            self._lines.popitem(last=False)
        self.workspace(task_id).write_files(
            plan_document(task_id, goal, items, lines),
            progress_document(task_id, goal, items, entries),
        )

    async def _entries(self, task_id: str, seq: int) -> _Entries:
        """The entries up to transition `seq` (others may have written since we did)."""
        cached = self._rendered.get(task_id)
        if cached is None or cached.seq != seq:
            cached = self._remember(task_id, await self.runs.transitions(task_id))
        else:
            self._rendered.move_to_end(task_id)
        return cached

    async def _entries_after(self, task_id: str, outcome: StepOutcome) -> list[str]:
        cached = self._rendered.get(task_id)
        new = outcome.transitions
        if (
            cached is not None
            and not outcome.replayed
            and (not new or cached.seq + 1 == new[0].seq)
        ):
            cached.add(new)
            self._rendered.move_to_end(task_id)
            return cached.lines
        return self._remember(task_id, await self.runs.transitions(task_id)).lines

    def _remember(self, task_id: str, transitions: Sequence[TransitionRow]) -> _Entries:
        entries = _Entries()
        entries.add(transitions)
        self._rendered[task_id] = entries
        while len(self._rendered) > CACHED_TASKS:
            self._rendered.popitem(last=False)
        return entries

    def forget(self, task_id: str) -> None:
        """The run ended here: its cached entries are no longer needed."""
        self._rendered.pop(task_id, None)
        self._recorded.pop(task_id, None)
        self._lines.pop(task_id, None)

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
            item=ItemChange(
                item_id=item.item_id,
                status="in_progress",
                attempts=attempt + 1,
                history=with_attempt(item, attempt, outcome=f"restarted: {why}"),
            ),
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
