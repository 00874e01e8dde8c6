"""What a run hands back when it ends (completed, failed, canceled or stopped by its budget):
the diff against its start commit, a git bundle of its commits, and the files it changed.

The diff leaves out the two files the harness writes (`plan.json`, `progress.md`) so it applies
to the caller's tree as it was. The bundle builds on the start commit when the caller has it
(a cloned repository, an earlier task); otherwise it holds everything. Each file is kept whole
in `task_files` and served by URL (`/outputs/<task>/<name>`, with the caller's key); one no
larger than the inline limit also travels inside the artifact.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from dataclasses import dataclass

from a2a_agent.harness.kernel.results import JSON
from a2a_agent.harness.workspace.git import PACK, bundle_of
from a2a_agent.harness.workspace.workspace import DERIVED_FILES, Workspace
from persistence.records import OutputFile, StepView

EXCLUDED = tuple(f":(exclude,top){name}" for name in DERIVED_FILES)
DIFF = "text/x-diff"
BUNDLE = "application/x-git-bundle"
CHANGES = {"A": "added", "M": "modified", "D": "deleted", "T": "type changed"}


@dataclass(frozen=True)
class OutputConfig:
    public_url: str  # where this service is reached: the outputs' URLs start with it
    inline_bytes: int  # a file up to this size also travels inside its artifact


async def start_of(ws: Workspace, view: StepView) -> str | None:
    """The commit results are measured against: the recorded start, else the first one."""
    if view.base_sha is not None:
        return view.base_sha
    if ws.head() is None:
        return None
    return (await ws.read_git("rev-list", "--max-parents=0", "HEAD")).decode().split()[-1]


def _caller_has(view: StepView) -> bool:
    """Whether the caller holds the start commit (its own repository, or an earlier task's
    result), so a bundle may build on it."""
    return (view.seed or {}).get("kind") in ("git", "from_task") and view.base_sha is not None


async def changed_files(ws: Workspace, base: str, head: str) -> list[JSON]:
    """Each path the run changed: how, and its size now (None once deleted)."""
    raw = await ws.read_git(
        "diff", "--name-status", "--no-renames", "-z", base, head, "--", ".", *EXCLUDED
    )
    fields = raw.decode(errors="surrogateescape").split("\0")
    changes = [(fields[n], fields[n + 1]) for n in range(0, len(fields) - 1, 2) if fields[n]]
    sizes: dict[str, int] = {}
    if changes:
        listed = await ws.read_git("ls-tree", "-r", "-l", "-z", head)
        for entry in listed.decode(errors="surrogateescape").split("\0"):
            meta, _, path = entry.partition("\t")
            size = meta.split()[-1] if meta else "-"
            if path and size.isdigit():
                sizes[path] = int(size)
    return [
        {"path": path, "change": CHANGES.get(status[:1], status), "size": sizes.get(path)}
        for status, path in changes
    ]


async def results(
    ws: Workspace, view: StepView, config: OutputConfig
) -> tuple[list[OutputFile], list[JSON]]:
    """The run's result files, and how its report and artifacts show them."""
    head = ws.head()
    base = await start_of(ws, view)
    if head is None or base is None:
        return [], []
    task_id = view.task_id
    prerequisite = base if _caller_has(view) else None
    revs = f"{head}\n" + (f"^{prerequisite}\n" if prerequisite else "")
    # Three reads of the same commits, each git in a box of its own: side by side, the end
    # of a run waits for the slowest instead of their sum.
    diff, pack, changed = await asyncio.gather(
        ws.read_git(
            "diff", "--binary", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
            base, head, "--", ".", *EXCLUDED,
        ),
        ws.read_git(*PACK, stdin=revs.encode()),
        changed_files(ws, base, head),
    )  # fmt: skip
    bundle = bundle_of(pack, head, prerequisite)
    files = [
        OutputFile("diff", DIFF, f"{task_id}.diff", diff),
        OutputFile("bundle", BUNDLE, f"{task_id}.bundle", bundle),
    ]
    shown = [
        _shown(files[0], task_id, config, base=base, head=head),
        _shown(files[1], task_id, config, head=head, prerequisite=prerequisite),
        {
            "name": "files",
            "media_type": "application/json",
            "base": base,
            "head": head,
            "files": changed,
        },
    ]
    return files, shown


def _shown(output: OutputFile, task_id: str, config: OutputConfig, **extra: object) -> JSON:
    inline = len(output.body) <= config.inline_bytes
    return {
        "name": output.name,
        "media_type": output.media_type,
        "filename": output.filename,
        "size": len(output.body),
        "sha256": hashlib.sha256(output.body).hexdigest(),
        "url": f"{config.public_url.rstrip('/')}/outputs/{task_id}/{output.name}",
        "inline": base64.b64encode(output.body).decode() if inline else None,
        **extra,
    }
