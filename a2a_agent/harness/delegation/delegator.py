"""Delegation: a chunk of work handed to a child run of this service, or to a peer A2A agent.

The model's `delegate` tool and a plan item's `delegate_to` start one. Starting is a keyed
effect whose idempotency key is also the message id it sends: a child is created with it
(this service takes a messageId once per owner), a peer is sent it (and deduplicates by it),
so a crash between sending and recording never makes a second task. The record says the
delegation is pending, and the workflow segment ends there: the parent waits as a row. When
the child (or the peer's task) ends, its result goes to the delegation (`delegation_changed()`
in SQL) and the parent's next segment runs the same step again under the same key, which now
concludes: the model reads the child's report (a summary and its plan with evidence, never
its transcript); a delegated item gets the peer's report in `delegated/<item>.md`, its diff
applied to the workspace, and then its own verify command decides.

A child's spending is charged to its parent's ledger too (`charge_ancestors()`); the budget a
child gets is the slice asked for, capped by what the parent has left. What a delegate asks a
person surfaces on the parent (`delegated_request`), and the answer goes back to it.
"""

from __future__ import annotations

import logging
import uuid
from functools import partial
from typing import Any

from a2a_agent.budget import Spend, effective_limits
from a2a_agent.errors import PlanError
from a2a_agent.harness.delegation.handover import (
    MAX_GOAL_CHARS,
    Children,
    DelegationConfig,
    ToolCall,
    budget_slice,
    delegation_id,
    report_file,
    report_for_model,
    webhook_path,
)
from a2a_agent.harness.delegation.peer_calls import cancel_remote, send_answer
from a2a_agent.harness.kernel.attempts import to_verification
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.evidence import with_attempt
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.files import overwrite_within
from a2a_agent.peers import PeerClient, PeerError, PeerRefused, state_name
from a2a_agent.plans import parse_plan
from a2a_agent.watched import crash_point
from a2a_agent.wire import from_wire
from persistence.delegations import DelegationStore
from persistence.errors import Conflict, NotFound
from persistence.records import (
    TERMINAL_STATES,
    Charge,
    Decision,
    Delegation,
    EffectStart,
    NewDelegation,
    NewTask,
    StepRecord,
    StepView,
)

log = logging.getLogger(__name__)


class Delegator:
    def __init__(
        self,
        ctx: StepContext,
        effects: Effects,
        *,
        children: Children,
        store: DelegationStore,
        peers: PeerClient | None,
        config: DelegationConfig,
    ) -> None:
        self.ctx = ctx
        self.effects = effects
        self.children = children
        self.store = store
        self.peers = peers
        self.config = config

    async def settle(self, task_id: str) -> StepResult:
        """This run ended. A child whose parent goes on: that parent's segment to start (the
        delegation ended with this run's closing record). A run that ended while delegates
        still worked for it (a cancel): they are canceled, local and remote, and the child
        runs' closing segments start (each cancels its own delegates in turn)."""
        start: list[list[Any]] = []
        parent = await self.store.parent_to_wake(task_id)
        if parent is not None:
            start.append(list(parent))
        for found in await self.store.open_delegates(task_id):
            if found.parent_state not in TERMINAL_STATES:
                break  # it ended in a way that leaves them nothing to cancel (not expected)
            if found.child_id is not None and found.child_owner is not None:
                reason = f"canceled: the task that delegated it ({task_id}) ended"
                try:
                    row = await self.children.cancel_task(found.child_id, found.child_owner, reason)
                except (Conflict, NotFound):
                    continue  # it ended on its own meanwhile; its end closes the delegation
                if row.segment > (found.child_segment or 0):
                    start.append([row.task_id, row.segment])
            elif found.peer is not None and found.remote_id is not None and self.peers:
                # Pending until the peer took the cancel: the peer watcher tries again.
                await cancel_remote(self.store, self.peers, found)
        return StepResult.ok({"start": start} if start else {})

    # ---- the model's tool ------------------------------------------------------------------

    async def call(
        self,
        view: StepView,
        *,
        key: str,
        item_id: str,
        attempt: int,
        tool_use: JSON,
        then: EffectStart | None,
    ) -> StepResult:
        """`delegate`: start it (the segment ends), or, once it ended, its report."""
        call = ToolCall(view, key, item_id, attempt, tool_use, then)
        did = delegation_id(item_id, attempt, key)
        found = view.delegations.get(did)
        if found is not None and found.state == "pending":
            return StepResult("paused", attempt)
        if found is None:
            args: dict[str, Any] = dict(tool_use.get("input") or {})
            try:
                spec = self._spec(view, args)
            except PlanError as exc:
                return await self._told(call, f"error: {exc}", is_error=True)
            started = await self._start(view, spec, did=did, key=key, item_id=item_id,
                                        attempt=attempt)  # fmt: skip
            if started.outcome == "ok" and "error" in started.payload:
                return await self._told(call, f"error: {started.payload['error']}", is_error=True)
            return started
        failed = (found.result or {}).get("state") != "completed"
        return await self._told(call, report_for_model(found), is_error=failed)

    def _spec(self, view: StepView, args: dict[str, Any]) -> JSON:
        goal = args.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            raise PlanError("goal must say what the delegate is to achieve")
        plan = args.get("plan")
        if plan is not None:
            # Refused here, not by the delegate; either spelling, as callers write it.
            parse_plan(from_wire(plan, "plan"), self.config.plan_limits)
        peer = args.get("peer")
        if peer is not None and (self.peers is None or peer not in self.peers.peers):
            known = sorted(self.peers.peers) if self.peers else []
            raise PlanError(f"there is no peer {peer!r}; known peers: {known or 'none'}")
        return {
            "goal": goal.strip()[:MAX_GOAL_CHARS],
            "plan": plan,
            "peer": peer,
            "budget": self._slice(view, args.get("budget")),
            "share_workspace": bool(args.get("share_workspace", False)),
        }

    def _slice(self, view: StepView, asked: Any) -> JSON:
        """The child's budget: what was asked (checked as a caller's budget is), capped in
        every dimension by what the parent has left."""
        limits = effective_limits(
            from_wire(asked, "budget") if isinstance(asked, dict) else None,
            self.config.budget_defaults,
            self.config.budget_caps,
        )
        return budget_slice(limits, view.budget)

    # ---- a plan item ---------------------------------------------------------------------

    async def item(
        self, view: StepView, item_id: str, attempt: int
    ) -> tuple[StepResult, Delegation | None]:
        """A plan item whose work a peer does: start it, or its ended delegation."""
        key = effect_key(view.task_id, "delegate", scope=item_id, attempt=attempt)
        did = delegation_id(item_id, attempt, key)
        found = view.delegations.get(did)
        if found is not None:
            return StepResult("paused" if found.state == "pending" else "ok", attempt), found
        item = view.item(item_id)
        target = item.delegate_to or {}
        spec = {
            "goal": f"{item.title}\n\n(It is checked with `{item.verify_command}` afterwards.)",
            "plan": target.get("plan"),
            "peer": target.get("peer"),
            "budget": self._slice(view, None),
            "share_workspace": False,
        }
        started = await self._start(view, spec, did=did, key=key, item_id=item_id,
                                    attempt=attempt)  # fmt: skip
        return started, None

    # ---- starting one --------------------------------------------------------------------

    async def _start(
        self, view: StepView, spec: JSON, *, did: str, key: str, item_id: str, attempt: int
    ) -> StepResult:
        send_key = f"{key}:send"
        view = await self.ctx.view(view.task_id, key=send_key, budget=True)
        effect = Effect(
            key=send_key, step="delegate", item_id=item_id, attempt=attempt,
            spend=Spend(tool="delegate"), integrity="none",
        )  # fmt: skip

        async def perform() -> JSON:
            if spec["peer"]:
                started = await self._send_to_peer(view, did, send_key, spec)
            else:
                started = await self._make_child(view, send_key, spec)
            crash_point(self.ctx.config.fault_file, "delegation-sent")  # tests only
            return started

        async def conclude(value: JSON, runs: int) -> Concluded:
            if "error" in value:
                record = StepRecord(
                    effect_key=send_key, step="delegate", result=value, runs=runs,
                    item_id=item_id, attempt=attempt,
                    charge=Charge(kind="tool", tool="delegate", actions=1),
                )  # fmt: skip
                return Concluded(record, StepResult.ok(value, attempt=attempt), fingerprint=False)
            record = StepRecord(
                effect_key=send_key,
                step="delegate",
                result=value,
                runs=runs,
                item_id=item_id,
                attempt=attempt,
                charge=Charge(kind="tool", tool="delegate", actions=1),
                delegation=NewDelegation(
                    id=did,
                    goal=spec["goal"],
                    item_id=item_id,
                    attempt=attempt,
                    peer=spec["peer"],
                    child_id=value.get("child_id"),
                    remote_id=value.get("remote_id"),
                    remote_state=value.get("state"),
                ),
            )
            start = [[value["child_id"], 0]] if value.get("child_id") else []
            return Concluded(
                record, StepResult("paused", attempt, {"start": start}), fingerprint=False
            )

        return await self.effects.run(view, effect, perform, conclude)

    async def _make_child(self, view: StepView, message_id: str, spec: JSON) -> JSON:
        """A child task of the same owner, linked to this one; made once per message id."""
        plan = (
            parse_plan(from_wire(spec["plan"], "plan"), self.config.plan_limits)
            if spec["plan"]
            else None
        )
        child_id = str(uuid.uuid4())
        message = {
            "messageId": message_id,
            "role": "ROLE_USER",
            "taskId": child_id,
            "referenceTaskIds": [view.task_id],
            "parts": [{"text": spec["goal"]}]
            + ([{"data": {"plan": spec["plan"]}}] if spec["plan"] else []),
        }
        policy = {
            k: v
            for k, v in {**self.config.policy_defaults, **view.policy}.items()
            if k not in ("acceptance", "publish", "published")
        }
        new = NewTask(
            task_id=child_id,
            owner=view.owner,
            context_id=view.task_id,
            goal=plan.goal if plan else spec["goal"],
            first_message=message,
            items=plan.items if plan else [],
            budget=spec["budget"],
            message_id=message_id,
            digest=message_id,
            policy={
                **policy,
                **({"acceptance": plan.acceptance} if plan and plan.acceptance else {}),
            },
            metadata={"parent": view.task_id},
            parent_id=view.task_id,
            view_of=view.task_id if spec["share_workspace"] else None,
        )
        made = await self.children.create_task(new)
        return {"child_id": made.row.task_id, "state": made.row.state}

    async def _send_to_peer(self, view: StepView, did: str, message_id: str, spec: JSON) -> JSON:
        if self.peers is None:
            return {"error": "no peers are configured (A2A_AGENT_PEERS)"}
        url = self.config.public_url.rstrip("/") + webhook_path(view.task_id, did)
        send = partial(
            self.peers.send,
            spec["peer"],
            message_id=message_id,
            text=spec["goal"],
            data={"plan": spec["plan"]} if spec["plan"] else None,
        )
        try:
            try:
                task = await send(push_url=url, push_token=self.config.tag(f"{view.task_id}/{did}"))
                pushed = True
            except PeerRefused as refused:
                # A peer may refuse our webhook (its guard, a URL it cannot reach) while taking
                # the work: then it is sent without one (nothing was made the first time), and
                # the supervisor's poll follows the task.
                log.info("peer %s refused our webhook (%s); sending without one", spec["peer"],
                         refused)  # fmt: skip
                task = await send()
                pushed = False
        except PeerError as exc:
            return {"error": str(exc)}
        return {"remote_id": task.id, "state": state_name(task), "pushed": pushed}

    # ---- the tool's result --------------------------------------------------------------

    async def _told(self, call: ToolCall, told: str, *, is_error: bool) -> StepResult:
        value = {"tool_use_id": call.tool_use["id"], "content": told, "is_error": is_error}
        record = StepRecord(
            effect_key=call.key, step="tool", result=value, item_id=call.item_id,
            attempt=call.attempt, charge=Charge(kind="tool", tool="delegate", actions=1),
            then=call.then,
        )  # fmt: skip
        outcome = await self.ctx.record(call.view, record, fingerprint=False)
        return StepResult.ok(outcome.result or value, attempt=call.attempt)

    # ---- a delegated item, once the peer ended ---------------------------------------------

    async def work_item(self, task_id: str, item_id: str, attempt: int) -> StepResult:
        """A plan item a peer works: start the delegation (the segment ends), or, once it
        ended, bring its work into the workspace (its report as a file, its diff applied)
        and hand the item to its own verify command."""
        key = effect_key(task_id, "delegated", scope=item_id, attempt=attempt)
        view = await self.ctx.view(task_id, key=key, budget=True)
        if view.effect is not None and view.effect.status == "completed":
            return StepResult.ok(attempt=attempt)
        started, found = await self.item(view, item_id, attempt)
        if found is None or found.state == "pending":
            return started
        result = found.result or {}
        ws = self.ctx.workspace(task_id)
        shown = report_for_model(found)
        overwrite_within(ws.root, f"delegated/{item_id}.md", report_file(found, shown))
        applied = None
        if result.get("diff"):
            applied = await ws.apply_patch(str(result["diff"]).encode())
        item = view.item(item_id)
        done = (
            f"the peer {found.peer} ended its task {found.remote_id}: {result.get('state')}"
            + (f"; its diff {'applied' if applied is None else 'did not apply: ' + applied}"
               if result.get("diff") else "")
        )  # fmt: skip
        record = to_verification(
            task_id,
            item,
            attempt,
            step="delegated",
            done=done,
            result={"delegation": found.id, "state": result.get("state"), "applied": applied},
            history=with_attempt(
                item, attempt,
                work={"delegate": found.peer, "task": found.remote_id,
                      "state": result.get("state"), "file": f"delegated/{item_id}.md"},
            ),
        )  # fmt: skip
        return await self.ctx.advance(view, record, attempt)

    # ---- an answer to a delegate's question ----------------------------------------------

    async def forward(self, view: StepView, decided: Decision) -> StepResult:
        """The answer a person gave on this task to a peer's question, for the peer (a child
        run of this service got it when it was given). It is kept before it is sent, and sent
        again by the peer watcher until the peer takes it or answers that it cannot."""
        request: JSON = dict(decided.details.get("request") or {})
        found = view.delegations.get(str(decided.details.get("delegation")))
        if found is None or found.peer is None or found.remote_id is None or self.peers is None:
            return StepResult.ok()
        approval = {"id": request.get("id"), "decision": decided.decision,
                    **({"note": decided.note} if decided.note else {})}  # fmt: skip
        answer = await self.store.queue_answer(
            view.task_id, found.id, decided.id,
            message_id=effect_key(view.task_id, f"forward.{decided.id}"), approval=approval,
        )  # fmt: skip
        if answer is None:
            return StepResult.ok()
        if answer.state == "pending":
            state = await send_answer(
                self.store, self.peers, answer, fault=self.ctx.config.fault_file
            )
        else:
            state = answer.state  # a run of this step again: it was sent (or refused) before
        return StepResult.ok({"answer": state})
