"""The final report, written from the stored items and their evidence."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.records import JSON, ItemRow
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


def build_report(
    items: Sequence[ItemRow],
    files_changed: Sequence[str] = (),
    budget: JSON | None = None,
    crashes: JSON | None = None,
    acceptance: object = None,
) -> JSON:
    """`acceptance`: the policy's `acceptance` (the plan's own check), if the plan has one."""
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
    summary = (
        f"{len(done)} of {len(items)} items done and verified"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
        + (f"; regressed (check fails again): {', '.join(regressed_now)}" if regressed_now else "")
        + (
            f"; interrupted (under way when the run ended): {', '.join(interrupted)}"
            if interrupted
            else ""
        )
        + (f"; not reached: {', '.join(remaining)}" if remaining else "")
        + "."
        + (f" Weak checks (passed before the work): {', '.join(weak)}." if weak else "")
        + (" The plan's own check passed before any work (weak)." if weak_plan else "")
    )
    # The plan's check is not an item: the counts stay counts of items (metadata.verification
    # counts the item rows in SQL), and what it found is shown beside them.
    shown = {"acceptance": plan_check} if plan_check else {}
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
