"""The final report, written from the stored items and their evidence."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.records import JSON, Decision, ItemRow
from persistence.views import last_reverified, precheck_result, verification_counts


def acceptance_shown(acceptance: object) -> JSON | None:
    """The plan's own check as metadata.acceptance shows it, from what the policy keeps of it
    (`acceptance` there): its last run after the work, if it ran, and its run before any."""
    if not isinstance(acceptance, dict):
        return None
    shown = dict(acceptance.get("checked") or {})
    before = acceptance.get("precheck")
    if isinstance(before, dict):
        shown["precheck"] = dict(before)
    return shown or None


def stopped_at(decided: Decision) -> JSON:
    """A person's decision that ended the run (a reject, a stop), as the report keeps it."""
    by = (
        "by default (the request expired)"
        if decided.how == "expired"
        else f"by {decided.by or 'the caller'}"
    )
    return {
        "request": decided.id,
        "kind": decided.kind,
        "item": decided.item_id,
        "decision": decided.decision,
        "by": by,
        "note": decided.note,
    }


def _stopped_words(stopped: JSON | None, halted: Sequence[str]) -> tuple[str, str]:
    """The summary's words for the decision that ended the run: its item's phrase (when the
    item was under way or not reached: it did not run because of the decision, not the
    reverse) and the sentence naming the request."""
    if not stopped:
        return "", ""
    how = f"{stopped['decision']} {stopped['by']}" + (
        f": {stopped['note']}" if stopped.get("note") else ""
    )
    kind = str(stopped["kind"]).replace("_", " ")
    sentence = f" The run stopped at request `{stopped['request']}` ({kind}): {how}."
    if stopped.get("item") not in halted:
        return "", sentence
    verb = "refused" if stopped["decision"] == "reject" else "stopped"
    return f"; {verb} {stopped['by']}: {stopped['item']}", sentence


def build_report(
    items: Sequence[ItemRow],
    files_changed: Sequence[str] = (),
    budget: JSON | None = None,
    crashes: JSON | None = None,
    acceptance: object = None,
    *,
    stopped: JSON | None = None,
) -> JSON:
    """`acceptance`: the policy's `acceptance` (the plan's own check), if the plan has one;
    `stopped`: the person's decision that ended the run, if one did (`stopped_at`)."""
    done = [i.item_id for i in items if i.status == "done"]
    failed = [i.item_id for i in items if i.status == "failed"]
    skipped = [i.item_id for i in items if i.status == "skipped"]
    regressed_now = [i.item_id for i in items if i.status == "regressed"]
    interrupted = [i.item_id for i in items if i.status == "interrupted"]
    remaining = [
        i.item_id
        for i in items
        if i.status not in ("done", "failed", "skipped", "regressed", "interrupted")
    ]
    checks = [
        {
            "item": i.item_id,
            "command": i.verify_command,
            "exit_code": (i.evidence or {}).get("exit_code"),
            "commit": i.commit_sha,
            "precheck": precheck_result(i),
            "reverified": last_reverified(i),
        }
        for i in items
        if i.status == "done"
    ]
    verification = verification_counts(items)
    weak = [i.item_id for i in items if precheck_result(i) == "weak"]
    plan_check = acceptance_shown(acceptance)
    weak_plan = (plan_check or {}).get("precheck", {}).get("result") == "weak"
    # The item a person refused is said so, not as under way or not reached (its status).
    refused, stopped_sentence = _stopped_words(stopped, [*interrupted, *remaining])
    refused_item = (stopped or {}).get("item") if refused else None
    said_interrupted = [i for i in interrupted if i != refused_item]
    said_remaining = [i for i in remaining if i != refused_item]
    summary = (
        f"{len(done)} of {len(items)} items done and verified"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
        + (f"; regressed (check fails again): {', '.join(regressed_now)}" if regressed_now else "")
        + refused
        + (
            f"; interrupted (under way when the run ended): {', '.join(said_interrupted)}"
            if said_interrupted
            else ""
        )
        + (f"; not reached: {', '.join(said_remaining)}" if said_remaining else "")
        + "."
        + stopped_sentence
        + (f" Weak checks (passed before the work): {', '.join(weak)}." if weak else "")
        + (" The plan's own check passed before any work (weak)." if weak_plan else "")
    )
    # The plan's check is not an item: the counts stay counts of items (metadata.verification
    # counts the item rows in SQL), and what it found is shown beside them.
    shown: JSON = {"acceptance": plan_check} if plan_check else {}
    if stopped:
        shown["stopped_at"] = dict(stopped)
    # An item whose last command could not start (not found or not executable in the
    # sandbox): why, in the words its evidence keeps (`sandbox.cannot_run`).
    cannot_run = {
        i.item_id: str(i.evidence["cannot_run"])
        for i in items
        if i.evidence and i.evidence.get("cannot_run")
    }
    if cannot_run:
        shown["cannot_run"] = cannot_run
    return {
        "summary": summary,
        "items_done": done,
        "items_failed": failed,
        "items_skipped": skipped,
        "items_regressed": regressed_now,
        "items_interrupted": interrupted,
        "checks_passed": checks,
        "verification": verification,
        **shown,
        "remaining": remaining,
        "files_changed": list(files_changed),
        "budget": {k: v for k, v in (budget or {}).items() if k not in ("limits", "alerts")},
        # What crashes cost: effects that ran again under their key (and how many extra
        # runs), and workspaces restored from checkpoints (each restarted an item).
        "reruns": int((crashes or {}).get("reruns", 0)),
        "steps_rerun": int((crashes or {}).get("steps_rerun", 0)),
        "workspaces_restored": int((crashes or {}).get("restored", 0)),
        "attempts": {i.item_id: i.attempts for i in items if i.attempts},
    }
