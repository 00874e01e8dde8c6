"""The final report, written from the stored items and their evidence."""

from __future__ import annotations

from collections.abc import Sequence

from persistence.records import JSON, ItemRow


def build_report(
    items: Sequence[ItemRow],
    files_changed: Sequence[str] = (),
    budget: JSON | None = None,
    crashes: JSON | None = None,
) -> JSON:
    done = [i.item_id for i in items if i.status == "done"]
    failed = [i.item_id for i in items if i.status == "failed"]
    skipped = [i.item_id for i in items if i.status == "skipped"]
    remaining = [i.item_id for i in items if i.status not in ("done", "failed", "skipped")]
    checks = [
        {
            "item": i.item_id,
            "command": i.verify_command,
            "exit_code": (i.evidence or {}).get("exit_code"),
            "commit": i.commit_sha,
        }
        for i in items
        if i.status == "done"
    ]
    summary = (
        f"{len(done)} of {len(items)} items done and verified"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f"; skipped: {', '.join(skipped)}" if skipped else "")
        + (f"; not reached: {', '.join(remaining)}" if remaining else "")
        + "."
    )
    return {
        "summary": summary,
        "items_done": done,
        "items_failed": failed,
        "items_skipped": skipped,
        "checks_passed": checks,
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
