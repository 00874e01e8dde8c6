"""Checks on an incoming message, and the new task it describes."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import Message, SendMessageRequest

from a2a_agent.budget import Prices, effective_limits, price_for
from a2a_agent.edge.convert import message_to_json
from a2a_agent.edge.workspace_intake import SourceIntake, file_parts
from a2a_agent.errors import ContentTypeError, MessageTooLarge, PlanError
from a2a_agent.harness.model import prompts
from a2a_agent.model.types import Usage
from a2a_agent.plans import PlanLimits, parse_plan, parse_policy
from a2a_agent.sources import ARCHIVE_TYPES
from a2a_agent.wire import from_wire, wire_name
from persistence.records import NewTask

DATA_KEYS = frozenset({"plan", "budget", "policy", "approval", "continue", "workspace", "publish"})
INPUT_MODES = ("text/plain", "application/json")
# A file seeds the workspace (an archive is unpacked): text of any kind, JSON, an image, an
# archive, or any bytes sent as application/octet-stream. The card lists these beside
# INPUT_MODES; a file of another type is refused (ContentTypeNotSupportedError).
FILE_MODES = ("application/octet-stream", "text/*", "image/*", *sorted(ARCHIVE_TYPES))


def takes_file_of(media_type: str) -> bool:
    kind = media_type.split(";", 1)[0].strip().lower()
    return (
        not kind
        or kind in INPUT_MODES
        or kind in ARCHIVE_TYPES
        or kind == "application/octet-stream"
        or kind.startswith(("text/", "image/"))
        or kind.endswith("+json")
    )


MAX_PARTS = 16
OUTPUT_MODES = ("text/plain", "application/json")
MODEL_NOT_AVAILABLE = (
    "This agent has no model configured, so it can neither plan a goal given as text nor "
    "work plan items that have no `run` command. Set ANTHROPIC_API_KEY on the server, or "
    "send a plan whose every item has a `run` command (a shell command the harness runs "
    "before `verify`)."
)


def message_digest(message: Message) -> str:
    """What a message says, as a hash: the same for a retry of it, whatever ids the service
    filled in (taskId, contextId)."""
    return digest_of(message_to_json(message))


def digest_of(content: dict[str, Any]) -> str:
    """`message_digest` of a message already in its JSON form (which is left as it is)."""
    said = {k: v for k, v in content.items() if k not in ("taskId", "contextId", "messageId")}
    return hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()


def nul_in(value: Any, where: str) -> str | None:
    """Where in `value` a string (or a key) holds a NUL character, or None."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            if "\x00" in str(key):
                return f"{where} (a key)"
            found = nul_in(item, f"{where}.{key}")
            if found:
                return found
    if isinstance(value, list):
        for n, item in enumerate(value):
            found = nul_in(item, f"{where}[{n}]")
            if found:
                return found
    return None


@dataclass(frozen=True)
class SmallestCall:
    """What the cheapest model call this server would make costs: a budget below it could
    never make one (calls are clamped to the budget, never below `output_tokens`)."""

    model: str
    output_tokens: int
    prices: Mapping[str, Prices]

    def cost(self, input_tokens: int) -> tuple[int, float]:
        usage = Usage(input_tokens=input_tokens, output_tokens=self.output_tokens)
        return input_tokens + self.output_tokens, price_for(self.prices, self.model).cost(usage)

    def refuse_if_too_small(self, budget: Mapping[str, Any], input_tokens: int) -> None:
        tokens, usd = self.cost(input_tokens)
        for key, least, unit in (("max_usd", usd, "USD"), ("max_tokens", tokens, "tokens")):
            limit = budget.get(key)
            if limit is not None and limit < least:
                raise PlanError(
                    f"budget.{wire_name(key)} is {limit:g}, too small for one model call on "
                    "this server: "
                    f"it needs at least {least:.4g} {unit} (about {input_tokens} input and "
                    f"{self.output_tokens} output tokens of {self.model}); raise it, or send a "
                    "plan whose every item has a `run` command"
                )


@dataclass(frozen=True)
class Intake:
    limits: PlanLimits
    max_message_bytes: int
    model_available: bool
    budget_defaults: Mapping[str, Any]
    budget_caps: Mapping[str, Any]
    smallest_call: SmallestCall | None = None
    # The server's policy for tasks that do not say (a continuation keeps its earlier task's).
    policy_defaults: Mapping[str, Any] = field(default_factory=dict)
    sources: SourceIntake = field(default_factory=SourceIntake)
    max_active_tasks: int = 0  # per caller; 0: no limit

    def check_message(self, request: SendMessageRequest) -> None:
        message = request.message
        size = message.ByteSize() - self.sources.file_bytes(message)
        if size > self.max_message_bytes:
            raise MessageTooLarge(
                f"the message is {size} bytes; this agent accepts at most "
                f"{self.max_message_bytes} (server setting A2A_AGENT_MAX_MESSAGE_BYTES)"
            )
        if not message.message_id:
            raise PlanError("the message has no messageId; give every message a unique one")
        if not message.parts:
            raise PlanError("the message has no parts; send a text part or a plan data part")
        if len(message.parts) > MAX_PARTS:
            raise PlanError(
                f"the message has {len(message.parts)} parts; at most {MAX_PARTS} are accepted "
                "(one text part, or a plan with its budget and policy, is what a task needs)"
            )
        content = message_to_json(message)
        # JSON writes a NUL as `\u0000`: only a message whose text holds that is walked.
        where = nul_in(content, "message") if "\\u0000" in json.dumps(content) else None
        if where is not None:
            raise PlanError(
                f"{where} contains a NUL character (\\u0000), which this agent cannot store; "
                "remove it or encode the text"
            )
        files = {n for n, _ in file_parts(message)}
        for n, part in enumerate(message.parts):
            if n in files:
                if not takes_file_of(part.media_type):
                    raise ContentTypeError(
                        f"part {n} is a file of media type {part.media_type!r}; this agent "
                        f"takes files of {', '.join(FILE_MODES)} (a file's bytes go into the "
                        "workspace as they are: send other kinds as application/octet-stream)"
                    )
                continue
            if part.media_type and part.media_type not in INPUT_MODES:
                raise ContentTypeError(
                    f"part {n} has media type {part.media_type!r}; this agent accepts "
                    f"{' and '.join(INPUT_MODES)}"
                )
        self.sources.check_files(message)
        accepted = list(request.configuration.accepted_output_modes)
        if accepted and not set(accepted) & set(OUTPUT_MODES):
            raise ContentTypeError(
                f"acceptedOutputModes {accepted} leaves nothing this agent can produce; "
                f"it answers in {' and '.join(OUTPUT_MODES)}"
            )

    def _data(self, message: Message) -> dict[str, Any]:
        """What the message's data parts carry: plan, budget, policy, approval (each at most
        once), with their keys in snake_case."""
        found: dict[str, list[Any]] = {key: [] for key in DATA_KEYS}
        for data in get_data_parts(message.parts):
            if not isinstance(data, dict) or not data or set(data) - DATA_KEYS:
                got = sorted(data) if isinstance(data, dict) else type(data).__name__
                raise PlanError(
                    'a data part must be an object with "plan", "budget", "policy", '
                    f'"approval", "continue", "workspace" or "publish" keys; got {got}'
                )
            for key, value in data.items():
                found[key].append(value)
        for key, values in found.items():
            if len(values) > 1:
                raise PlanError(f"the message carries more than one {key}; send one per task")
        return {key: from_wire(values[0], key) for key, values in found.items() if values}

    def follow_up_approval(self, message: Message) -> Any:
        """The approval a follow-up carries (None if none); what a follow-up cannot change is
        refused."""
        data = self._data(message)
        for key in ("plan", "budget", "policy", "continue", "workspace", "publish"):
            if key in data:
                raise PlanError(
                    f"a {key} can only be set in the first message of a task; a follow-up "
                    'answers a pending request ({"approval": ...} or a text) or, while the '
                    "task works, adds a note for it (a text)"
                )
        return data.get("approval")

    def _continuation(
        self,
        *,
        task_id: str,
        owner: str,
        context_id: str,
        message: Message,
        data: dict[str, Any],
        policy: dict[str, Any],
    ) -> NewTask:
        """{"continue": true} with one task in referenceTaskIds: that task's plan, from its
        last verified checkpoint, with a fresh budget (this message's, or the defaults)."""
        if data["continue"] is not True:
            raise PlanError('"continue" must be true')
        if "plan" in data:
            raise PlanError("a continuation takes up the earlier task's plan; send no plan")
        refs = list(message.reference_task_ids)
        if len(refs) != 1:
            raise PlanError(
                'a continuation ({"continue": true}) names exactly one earlier task in '
                f"referenceTaskIds; this message names {len(refs)}"
            )
        first = message_to_json(message)
        return NewTask(
            task_id=task_id,
            owner=owner,
            context_id=context_id,
            goal="",
            first_message=first,
            items=[],
            budget=effective_limits(data.get("budget"), self.budget_defaults, self.budget_caps),
            message_id=message.message_id,
            digest=digest_of(first),
            policy=policy,
            continue_from=refs[0],
        )

    def new_task(self, task_id: str, owner: str, context_id: str, message: Message) -> NewTask:
        """The task a first message describes: its plan or goal, budget and policy, and where
        its workspace starts (PlanError naming what is wrong; nothing is stored)."""
        data = self._data(message)
        new = self._new_task(task_id, owner, context_id, message, data)
        if new.continue_from is not None:
            return new
        sources = self.sources.take(message, data)
        policy = dict(new.policy)
        if sources.publish is not None:
            policy["publish"] = sources.publish
        return dataclasses.replace(
            new,
            seed=sources.seed,
            seed_from=sources.seed_from,
            inputs=sources.inputs,
            policy=policy,
            first_message=self.sources.history_message(new.first_message, task_id),
        )

    def _new_task(
        self, task_id: str, owner: str, context_id: str, message: Message, data: dict[str, Any]
    ) -> NewTask:
        if "approval" in data:
            raise PlanError(
                "an approval answers a task's pending request: send it with that task's taskId"
            )
        raw_plan, raw_budget = data.get("plan"), data.get("budget")
        policy = parse_policy(data["policy"]) if "policy" in data else {}
        if "continue" in data:
            if "workspace" in data or file_parts(message):
                raise PlanError(
                    "a continuation starts from the earlier task's workspace; send no "
                    "workspace and no files"
                )
            return self._continuation(
                task_id=task_id,
                owner=owner,
                context_id=context_id,
                message=message,
                data=data,
                policy=policy,
            )
        budget = effective_limits(raw_budget, self.budget_defaults, self.budget_caps)
        # One conversion for both: a message of many parts costs one walk, not two.
        first = message_to_json(message)
        message_id, digest = message.message_id, digest_of(first)
        text = "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text")
        if raw_plan is None:
            if not text.strip():
                raise PlanError("the message has no text and no plan; say what to do")
            if self.smallest_call is not None and self.model_available:
                planning = prompts.estimated_tokens(prompts.planning_messages(text.strip()))
                planning += len(prompts.PLANNER_SYSTEM) // 4
                self.smallest_call.refuse_if_too_small(budget, planning)
            return NewTask(
                policy={**self.policy_defaults, **policy},
                task_id=task_id,
                owner=owner,
                context_id=context_id,
                goal=text.strip(),
                first_message=first,
                items=[],
                budget=budget,
                rejection=None if self.model_available else MODEL_NOT_AVAILABLE,
                message_id=message_id,
                digest=digest,
            )
        plan = parse_plan(raw_plan, self.limits)
        policy = {**self.policy_defaults, **policy, **(plan.policy or {})}
        if plan.acceptance is not None:
            policy["acceptance"] = plan.acceptance
        needing_model = plan.items_needing_model
        rejection = None
        if needing_model and not self.model_available:
            rejection = f"Items {needing_model} have no `run` command. {MODEL_NOT_AVAILABLE}"
        elif needing_model and self.smallest_call is not None:
            self.smallest_call.refuse_if_too_small(budget, len(prompts.WORKER_SYSTEM) // 4 + 300)
        return NewTask(
            task_id=task_id,
            owner=owner,
            context_id=context_id,
            goal=plan.goal,
            first_message=first,
            items=plan.items,
            rejection=rejection,
            budget=budget,
            message_id=message_id,
            digest=digest,
            policy=policy,
        )
