"""A message to a task that exists: the follow-up methods of our RequestHandler.

A follow-up is a reply to the task's pending request (an approval, or the answer to its
question) or, while the task works, a steering note for the model's next context;
`answers.py` says which. Each is applied once per messageId and, with `ifGenerationMatch`,
only to the task as it was at that generation (`generations.py`). A reply that resumes the
task starts its next segment on the run engine.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import Message
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError

from a2a_agent.edge.answers import (
    ReplyIntent,
    from_approval,
    from_text,
    message_text,
    note_taken,
    pending_request,
)
from a2a_agent.edge.convert import message_to_json
from a2a_agent.edge.generations import stale
from a2a_agent.edge.intake import Intake, message_digest
from a2a_agent.engine import RunEngine
from a2a_agent.errors import PlanError
from persistence.records import JSON, TERMINAL_STATES, TaskRow
from persistence.replies import Note, Reply, ReplyStore
from persistence.tasks import TaskStore


def reused_message_id(message_id: str, task_id: str) -> str:
    """Why a messageId this caller sent before, with another message, is refused (a new
    task's or a follow-up's)."""
    return (
        f"messageId {message_id!r} was already used for a different message (task {task_id}); "
        "a retry must send the same message, and every new message needs its own messageId"
    )


# The ends a continuation ({"continue": true}) may take up (persistence's create_task): all
# but a rejection, which did no work to go on from.
CONTINUABLE = TERMINAL_STATES - {"rejected"}


def no_more_messages(row: TaskRow) -> str:
    """Why a message to an ended task is refused, and what to send instead: a new task, or,
    for a task that ended with a plan, a continuation of it."""
    said = (
        f"task {row.task_id} is {row.state} and takes no more messages; send a new message "
        "without taskId to start a new task"
    )
    if row.state in CONTINUABLE and (row.plan or {}).get("items"):
        said += (
            ", or, to take up its plan from its last verified item with a fresh budget, one "
            f'with a DataPart {{"continue": true}} and referenceTaskIds ["{row.task_id}"]'
        )
    return said


class FollowUpMethods:
    store: TaskStore
    replies: ReplyStore
    engine: RunEngine
    intake: Intake

    async def _load(self, task_id: str, owner: str) -> TaskRow:
        raise NotImplementedError  # the handler's

    async def _follow_up(
        self, owner: str, message: Message, by: str, generation: int | None = None
    ) -> tuple[TaskRow, JSON | None]:
        """A reply to the task's pending request, or a steering note while it works; each
        applied once per messageId, and, given a generation (ifGenerationMatch), only to the
        task as it was at that generation."""
        row = await self._load(message.task_id, owner)
        earlier = await self.store.message_claim(owner, message.message_id)
        if earlier is not None:
            if earlier.task_id == row.task_id and earlier.says(message_digest(message)):
                # This message was applied before: nothing happens twice.
                return row, {"retry": {"messageId": message.message_id}}
            raise InvalidParamsError(reused_message_id(message.message_id, earlier.task_id))
        message.context_id = row.context_id
        try:
            approval = self.intake.follow_up_approval(message)
        except PlanError as exc:
            raise InvalidParamsError(str(exc)) from exc
        if row.is_terminal and approval is None:
            raise UnsupportedOperationError(no_more_messages(row))
        try:
            text = message_text(message)
            request = pending_request(row.status_data)
            if approval is not None:
                intent = from_approval(approval, self.intake.budget_caps, None)
            elif row.state == "input_required" and request is not None:
                intent = from_text(text, request)
            else:
                intent = None
        except PlanError as exc:
            raise InvalidParamsError(str(exc)) from exc
        if intent is None:
            noted = await self._note(row, message, text, generation)
            return noted, {"note": note_taken(noted, text)}
        return await self._answer(row, message, intent, by, generation), None

    async def _note(
        self, row: TaskRow, message: Message, text: str, generation: int | None
    ) -> TaskRow:
        if not text:
            raise InvalidParamsError(
                f"task {row.task_id} is {row.state}: a follow-up to it is a text (a note for "
                "its work) or, when it asks, an approval; this message has neither"
            )
        noted = await self.replies.note(
            row.task_id,
            Note(
                owner=row.owner,
                text=text,
                message=message_to_json(message),
                message_id=message.message_id,
                digest=message_digest(message),
                if_generation=generation,
            ),
        )
        if noted.result == "stale":
            raise stale(row.task_id, generation, noted.generation)
        if noted.result == "not_working" and noted.row is not None:
            raise UnsupportedOperationError(
                f"task {row.task_id} is {noted.row.state} and takes no notes now"
            )
        if noted.row is None:
            raise TaskNotFoundError(f"task {row.task_id!r} does not exist (or is not yours)")
        return noted.row

    async def _answer(
        self,
        row: TaskRow,
        message: Message,
        intent: ReplyIntent,
        by: str,
        generation: int | None = None,
    ) -> TaskRow:
        answered = await self.replies.answer(
            row.task_id,
            Reply(
                owner=row.owner,
                decision=intent.decision,
                approval_id=intent.approval_id,
                note=intent.note,
                decided_by=by or None,
                budget=intent.budget,
                message=message_to_json(message),
                message_id=message.message_id,
                digest=message_digest(message),
                if_generation=generation,
            ),
        )
        task_id = row.task_id
        if answered.result == "stale":
            raise stale(task_id, generation, answered.generation)
        if answered.result == "resumed" and answered.row is not None:
            await self.engine.start(task_id, answered.segment)
            if answered.forwarded is not None:  # a child run got the answer too
                await self.engine.start(*answered.forwarded)
            return answered.row
        if answered.result == "repeat" and answered.row is not None:
            return answered.row
        pause = answered.pause or {}
        if answered.result == "decided":
            how = pause.get("decided_how")
            when = str(pause.get("decided_at", ""))[:19]
            raise InvalidParamsError(
                f"request `{pause.get('id')}` of task {task_id} was already decided: "
                f"{pause.get('decision')} "
                + ("by default, because it expired" if how == "expired" else f"({how})")
                + f" at {when}; this reply changed nothing"
            )
        if answered.result == "bad_decision":
            raise InvalidParamsError(
                f"{intent.decision!r} is not an option of request `{pause.get('id')}`; "
                f"its options are {pause.get('options')}; nothing changed"
            )
        if answered.result == "unknown":
            raise InvalidParamsError(
                f"task {task_id} has no request `{intent.approval_id}`; the pending one is "
                f"`{answered.pending}`; nothing changed"
            )
        if answered.result == "none_pending":
            raise InvalidParamsError(
                f"task {task_id} is {row.state} and has asked nothing, so there is no request "
                "to approve; nothing changed (a text while it works is a note for it)"
            )
        raise TaskNotFoundError(f"task {task_id!r} does not exist (or is not yours)")
