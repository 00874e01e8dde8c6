"""What a follow-up message to a task means: a reply to its pending request, or a note.

A reply is a DataPart {"approval": {"id", "decision", "note"?, "budget"?}} or a text that
starts with one of the request's options ("approve", "reject: too risky", "retry, but run
the migrations first"); to a question, any text is the answer. While the task works, a text
is a steering note for the model's next context.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.types.a2a_pb2 import Message

from a2a_agent.budget import effective_limits
from a2a_agent.errors import PlanError
from persistence.records import JSON, TaskRow

APPROVAL_KEYS = frozenset({"id", "decision", "note", "budget"})
MAX_NOTE_CHARS = 4000
_FIRST_WORD = re.compile(r"^\s*([A-Za-z_]+)[\s:,.;!-]*(.*)$", re.DOTALL)


@dataclass(frozen=True)
class ReplyIntent:
    decision: str
    approval_id: str | None = None
    note: str | None = None
    budget: JSON | None = None


def message_text(message: Message) -> str:
    return "\n".join(p.text for p in message.parts if p.WhichOneof("content") == "text").strip()


def pending_request(status_data: JSON | None) -> JSON | None:
    request = (status_data or {}).get("approval_request")
    return request if isinstance(request, dict) else None


def _note(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PlanError(f"approval.note must be a string, got {type(value).__name__}")
    if len(value) > MAX_NOTE_CHARS:
        raise PlanError(f"approval.note is {len(value)} characters; at most {MAX_NOTE_CHARS}")
    return value.strip() or None


def from_approval(
    approval: Any, caps: Mapping[str, Any], current: Mapping[str, Any] | None
) -> ReplyIntent:
    if not isinstance(approval, Mapping):
        raise PlanError('"approval" must be an object: {"id", "decision", "note"}')
    extra = sorted(set(approval) - APPROVAL_KEYS)
    if extra:
        raise PlanError(f"approval has unknown field(s) {extra}; allowed: {sorted(APPROVAL_KEYS)}")
    decision = approval.get("decision")
    if not isinstance(decision, str) or not decision.strip():
        raise PlanError("approval.decision must be one of the request's options (a string)")
    approval_id = approval.get("id")
    if approval_id is not None and not isinstance(approval_id, str):
        raise PlanError("approval.id must be the request's id (a string)")
    budget = None
    if approval.get("budget") is not None:
        if decision.strip().lower() != "approve":
            raise PlanError("approval.budget raises the limits of an approval; decide approve")
        raised = effective_limits(approval["budget"], {}, caps)
        budget = {
            **{k: v for k, v in raised.items() if k != "max_actions"},
            **(
                {"max_actions": {**(current or {}).get("max_actions", {}), **raised["max_actions"]}}
                if raised.get("max_actions")
                else {}
            ),
        }
    return ReplyIntent(
        decision=decision.strip().lower(),
        approval_id=approval_id,
        note=_note(approval.get("note")),
        budget=budget,
    )


def from_text(text: str, request: JSON) -> ReplyIntent:
    """A text reply to `request`: its first word, when it is an option, is the decision."""
    options = [str(o) for o in request.get("options") or []]
    match = _FIRST_WORD.match(text)
    if match and match.group(1).lower() in options:
        rest = match.group(2).strip()
        return ReplyIntent(
            decision=match.group(1).lower(),
            approval_id=str(request.get("id")),
            note=_note(rest or None),
        )
    asked = (request.get("details") or {}).get("request") or {}  # a delegate's, surfaced
    if request.get("kind") == "question" or asked.get("kind") == "question":
        return ReplyIntent(decision="answer", approval_id=str(request.get("id")), note=_note(text))
    raise PlanError(
        f"the task waits for a decision on `{request.get('id')}` ({request.get('summary')}); "
        f"start the text with one of {options}, or send "
        f'{{"approval": {{"id": "{request.get("id")}", "decision": ...}}}}'
    )


def note_taken(row: TaskRow, text: str) -> JSON:
    """What the reply to a steering note says of it: the text kept, and who reads it. The
    model reads notes when it works an item that has no `run` command; a plan whose items
    left are all commands, questions or delegations has no model to read one, and the caller
    is told so rather than left to think it steers the run."""
    items = [i for i in (row.plan or {}).get("items") or [] if isinstance(i, dict)]
    left = [i for i in items if i.get("status") not in ("done", "failed", "skipped")]
    by_model = [
        str(i.get("id")) for i in left if not (i.get("run") or i.get("ask") or i.get("delegateTo"))
    ]
    if not items:
        goes = (
            "kept with the task; the model reads it when it works the items of the plan it "
            "is drafting"
        )
    elif by_model:
        goes = (
            f"kept with the task; the model reads it in its next turn on item `{by_model[0]}` "
            "and on every item it works after"
        )
    else:
        goes = (
            "kept with the task's record only: no model reads it, since every item left is "
            "worked by its own `run` command (or asks a person, or is delegated); to change "
            "what the run does, cancel it and send a new plan"
        )
    return {"text": text, "readBy": "model" if (not items or by_model) else "nobody", "goes": goes}
