"""Plain records the store takes and returns; no driver or protocol types cross this line."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from persistence.errors import NotFound

JSON = dict[str, Any]

TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})


@dataclass(frozen=True)
class NewItem:
    item_id: str
    title: str
    run: str | None
    verify_command: str
    verify_timeout_s: int
    max_attempts: int
    run_timeout_s: int | None = None  # None: the server's command timeout
    timeout_s: int | None = None  # the whole item, all attempts; None: no limit of its own
    irreversible: bool = False  # a person approves before it runs
    ask: str | None = None  # a question item: its work is a person's answer
    facts: list[JSON] = field(default_factory=list)  # it establishes: {key, check, max_age_s}
    precheck: bool = True  # its verify command runs once before the work, to see it fail
    # Its check only reads the workspace: re-verification may run it beside other such checks.
    verify_independent: bool = False
    delegate_to: JSON | None = None  # {"peer", "plan"?}: a peer agent does the item's work

    @property
    def runs_commands(self) -> bool:
        """Whether the caller gives commands to run: its own `run`, or `run`s in the plan it
        has a peer work (which the peer runs under this server's key)."""
        if self.run is not None:
            return True
        sent = (self.delegate_to or {}).get("plan") or {}
        return any(isinstance(i, dict) and i.get("run") for i in sent.get("items") or [])


@dataclass(frozen=True)
class NewTask:
    task_id: str
    owner: str
    context_id: str
    goal: str
    first_message: JSON
    items: list[NewItem]
    rejection: str | None = None
    metadata: JSON = field(default_factory=dict)
    budget: JSON = field(default_factory=dict)
    # The caller's messageId and a digest of the message's content: a second send of the
    # same messageId is recognised (same digest: a retry; another: a reuse).
    message_id: str = ""
    digest: str = ""
    policy: JSON = field(default_factory=dict)
    continue_from: str | None = None  # an earlier task whose plan and checkpoint this takes up
    # Where the workspace starts: {"kind": "git", "url", "ref", ...} or {"kind": "files"};
    # `seed_from` names an earlier task whose final state it starts from.
    seed: JSON | None = None
    seed_from: str | None = None
    inputs: list[InputFile] = field(default_factory=list)
    trace_context: str | None = None  # W3C traceparent of the task's span
    parent_id: str | None = None  # a child run: the task that delegated it
    view_of: str | None = None  # a child run on a copy of this task's workspace


@dataclass(frozen=True)
class InputFile:
    """A file the first message carried (its bytes) or pointed to (its URL)."""

    name: str
    media_type: str
    filename: str | None
    size: int
    sha256: str
    body: bytes | None = None
    url: str | None = None


@dataclass(frozen=True)
class NewDelegation:
    """Work the run handed on: to a child run (`child_id`) or a peer's task (`remote_id`)."""

    id: str
    goal: str
    item_id: str | None = None
    attempt: int | None = None
    peer: str | None = None
    child_id: str | None = None
    remote_id: str | None = None
    remote_state: str | None = None


@dataclass(frozen=True)
class Delegation:
    """A delegation as the run sees it: still pending, or ended with its result."""

    id: str
    state: str
    peer: str | None
    child_id: str | None
    remote_id: str | None
    remote_state: str | None
    result: JSON | None
    item_id: str | None = None
    goal: str = ""


@dataclass(frozen=True)
class OutputFile:
    """A result of the run kept whole (a diff, a bundle) and served by URL."""

    name: str
    media_type: str
    filename: str
    body: bytes


@dataclass(frozen=True)
class Submitted:
    """What a submission stored: the task, and whether its messageId had come before (then
    nothing new was stored and `row` is the task that message made)."""

    row: TaskRow
    repeated: bool = False
    same_message: bool = True


@dataclass(frozen=True)
class TaskRow:
    task_id: str
    owner: str
    context_id: str
    state: str
    status_text: str | None
    status_at: datetime
    history: list[JSON]
    metadata: JSON
    plan: JSON | None
    report: JSON | None
    event_seq: int
    status_data: JSON | None = None  # a DataPart of the status message (a pending request)
    segment: int = 0  # the run's workflow segment: one more after each wait

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ItemRow:
    item_id: str
    position: int
    title: str
    run: str | None
    verify_command: str
    verify_timeout_s: int
    max_attempts: int
    status: str
    attempts: int
    evidence: JSON | None
    commit_sha: str | None
    failures: int
    history: list[JSON] = field(default_factory=list)
    run_timeout_s: int | None = None
    timeout_s: int | None = None
    elapsed_s: float | None = None  # since its first attempt began (the database's clock)
    irreversible: bool = False
    ask: str | None = None
    facts: list[JSON] = field(default_factory=list)
    precheck: bool = True
    verify_independent: bool = False
    delegate_to: JSON | None = None

    def same_row(self, other: ItemRow) -> bool:
        """`other` is this row, read at another moment: equal in every field but the clock
        (`elapsed_s`), which moves while nothing is written."""
        return self is other or self == replace(other, elapsed_s=self.elapsed_s)

    def time_left_s(self) -> float | None:
        """Seconds the item may still take; None without a limit of its own."""
        if self.timeout_s is None:
            return None
        return self.timeout_s - (self.elapsed_s or 0.0)


@dataclass(frozen=True)
class TransitionRow:
    seq: int
    item_id: str | None
    attempt: int | None
    from_state: str | None
    to_state: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class Transition:
    """A state change to record. `at` is the harness's clock when it rendered the change into
    the workspace's files before recording it (so files and rows agree); else the database's."""

    to_state: str
    reason: str
    item_id: str | None = None
    attempt: int | None = None
    from_state: str | None = None
    at: datetime | None = None


@dataclass(frozen=True)
class ItemChange:
    item_id: str
    status: str
    attempts: int
    evidence: JSON | None = None
    commit_sha: str | None = None
    failures: int | None = None
    history: list[JSON] | None = None  # the item's attempts, whole, when the step changed them
    # A new definition (title, run, verify_command, verify_timeout_s, run_timeout_s,
    # max_attempts) for an item not done yet: an approved plan change.
    definition: JSON | None = None


@dataclass(frozen=True)
class Checkpoint:
    """A verified commit and the git bundle that recreates it on top of the previous one."""

    sha: str
    bundle: bytes


@dataclass(frozen=True)
class Charge:
    """What one step costs the run's budget (a reservation until the step completes)."""

    kind: str
    tokens: int = 0
    usd: float = 0.0
    actions: int = 0
    tool: str | None = None


@dataclass(frozen=True)
class EffectStart:
    """The effect the run will perform next, marked `started` (with no run counted yet) in
    the transaction of the step before it, so marking it costs no commit of its own."""

    key: str
    step: str
    item_id: str | None
    attempt: int | None


@dataclass(frozen=True)
class PauseRequest:
    """What a paused run asks a person: a row in `pauses`, shown in the status message."""

    id: str
    kind: str
    summary: str
    options: list[str]
    on_expiry: str
    expires_s: float
    details: JSON = field(default_factory=dict)
    item_id: str | None = None
    attempt: int | None = None


@dataclass(frozen=True)
class Decision:
    """A person's answer to a request (or its default, when it expired)."""

    id: str
    kind: str
    decision: str
    note: str | None
    how: str  # reply | expired | ended
    by: str | None = None
    segment: int = 0  # the segment that asked
    item_id: str | None = None
    details: JSON = field(default_factory=dict)


@dataclass(frozen=True)
class Fact:
    """What the run established: a value, where it came from, and how to check it again."""

    key: str
    value: str
    source: str
    check: str | None = None
    max_age_s: int | None = None
    age_s: float = 0.0

    @property
    def stale(self) -> bool:
        return (
            self.check is not None and self.max_age_s is not None and (self.age_s > self.max_age_s)
        )


@dataclass(frozen=True)
class StepRecord:
    """Everything one checkpointed step changes, written in one transaction.

    `effect_key` makes the write idempotent: a step that re-runs after a crash finds its
    effect completed and gets the stored result back instead of writing twice. `runs` is how
    many times the effect ran under that key (more than 1 after a crash re-run).
    """

    effect_key: str
    step: str
    result: JSON
    item: ItemChange | None = None
    more_items: list[ItemChange] = field(default_factory=list)  # others changed at once
    task_state: str | None = None
    status_text: str | None = None
    transitions: list[Transition] = field(default_factory=list)
    report: JSON | None = None
    fingerprint: str | None = None
    checkpoint: Checkpoint | None = None
    new_items: list[NewItem] = field(default_factory=list)
    charge: Charge | None = None
    metadata_patch: JSON | None = None
    policy_patch: JSON | None = None  # keys merged into the task's policy (a model's plan)
    base_sha: str | None = None  # the start commit results are measured against
    seed_patch: JSON | None = None  # keys merged into the task's seed (the clone's commit)
    outputs: list[OutputFile] = field(default_factory=list)
    delegation: NewDelegation | None = None  # work handed to a child run or a peer
    model_call: ModelCall | None = None
    runs: int = 1
    item_id: str | None = None
    attempt: int | None = None
    then: EffectStart | None = None
    pause: PauseRequest | None = None  # the step asks a person (the task waits)
    facts: list[Fact] = field(default_factory=list)  # established or checked again
    first_position: int = 0  # where new_items go in the plan (after the items there are)
    # The record that closes a run ended by others (a cancel): it may add its report, final
    # entry and last checkpoint to a task that is already terminal.
    closing: bool = False
    started_at: datetime | None = None  # when the step's run began (its view was read)

    @property
    def effect_item_id(self) -> str | None:
        if self.item_id is not None or self.item is None:
            return self.item_id
        return self.item.item_id

    @property
    def effect_attempt(self) -> int | None:
        if self.attempt is not None or self.item is None:
            return self.attempt
        return self.item.attempts

    @property
    def changes_files(self) -> bool:
        """Whether plan.json / progress.md must be rendered again after this record."""
        return bool(self.transitions or self.item or self.more_items or self.new_items)


@dataclass(frozen=True)
class StepOutcome:
    """What recording a step gives back: enough to render the files without reading again.

    `changed_items` are the item rows the step changed, as written; `items` all the task's
    items once it is recorded, when the step changed or added any (or, on a replay, as the
    store read them); `transitions` the ones it wrote (none when replayed: the caller
    reloads them if it needs them)."""

    result: JSON
    replayed: bool
    task_state: str
    items: list[ItemRow] = field(default_factory=list)
    changed_items: list[ItemRow] = field(default_factory=list)
    transitions: list[TransitionRow] = field(default_factory=list)


@dataclass(frozen=True)
class StepView:
    """What a step reads as it starts, in one round trip."""

    task_id: str
    state: str
    goal: str
    items: list[ItemRow]
    fingerprint: str | None
    checkpoint_sha: str | None
    effect: EffectRow | None = None
    budget: JSON | None = None
    closed: bool = False  # the run's end is recorded (its report written)
    transition_seq: int = 0  # the last transition's number as the step began
    segment: int = 0
    policy: JSON = field(default_factory=dict)
    decisions: dict[str, Decision] = field(default_factory=dict)  # by request id
    facts: list[Fact] = field(default_factory=list)
    seed: JSON | None = None  # where the workspace started, and how to rebuild its base
    base_sha: str | None = None
    owner: str = ""
    delegations: dict[str, Delegation] = field(default_factory=dict)  # by id
    read_at: datetime = field(default_factory=lambda: datetime.now(UTC))  # the step's start
    # When this process asked for the view (time.monotonic(), before the query went out):
    # what changed the task after it is news to the step (`TaskNotifier.quiet_since`).
    # 0.0: not known, so nothing is taken on trust.
    asked_at: float = 0.0

    def item(self, item_id: str) -> ItemRow:
        for item in self.items:
            if item.item_id == item_id:
                return item
        raise NotFound(f"item {item_id!r} is not in the plan")

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class EffectRow:
    key: str
    status: str
    runs: int
    result: JSON | None


@dataclass(frozen=True)
class ModelCall:
    purpose: str
    model: str
    stop_reason: str
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


@dataclass(frozen=True)
class TaskPage:
    tasks: list[TaskRow]
    total: int
    next_cursor: str | None
