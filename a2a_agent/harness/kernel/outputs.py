"""What a run hands back when it ends (completed, failed, canceled or stopped by its budget):
the diff against its start commit, a git bundle of its commits, and the files it changed.

The diff leaves out the two files the harness writes (`plan.json`, `progress.md`) so it applies
to the caller's tree as it was. The bundle builds on the start commit when the caller has it
(a cloned repository, an earlier task); otherwise it holds everything. Each file is kept whole
in `task_files` and served by URL (`/outputs/<task>/<name>`, with the caller's key); one no
larger than the inline limit also travels inside the artifact.
"""

from __future__ import annotations

import base64
import hashlib
import shlex
from dataclasses import dataclass

from a2a_agent.harness.kernel.results import JSON
from a2a_agent.harness.workspace.git import PACK, bundle_of
from a2a_agent.harness.workspace.packs import is_loose_line
from a2a_agent.harness.workspace.workspace import DERIVED_FILES, Workspace, WorkspaceError
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


def _prerequisite(view: StepView) -> str | None:
    """The start commit when the caller holds it (its own repository, or an earlier task's
    result), so the run's bundle builds on it; None: the bundle holds the whole history."""
    caller_has = (view.seed or {}).get("kind") in ("git", "from_task")
    return view.base_sha if caller_has else None


# The reads of a run's end in one box (`Workspace.read_script`): the diff against the
# start, a pack of the commits after the prerequisite (none: all; not made where the harness
# writes it, `packs.py`: the part is empty then), the paths changed and, if any, the tree's
# sizes, and the paths the commits before the run's last one changed (the report's
# `files_changed`: the work's, without what the closing commit took of an attempt cut short);
# each written to the box's own /tmp, then sent as the lengths in bytes, one a line, and the
# bytes one after the other (two processes, `stat` and `cat`, not a `wc` and a `cat` for each
# part). Arguments: base, head, prerequisite, the commit before the last, whether git packs
# ("pack") or not (""), git, its options.
OUTPUTS_SCRIPT = f"""set -e
base=$1 head=$2 prerequisite=$3 before=$4 with_pack=$5 git=$6
shift 6
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$git" "$@" diff --binary --full-index --no-color --no-ext-diff --no-textconv \\
  "$base" "$head" -- . {" ".join(shlex.quote(e) for e in EXCLUDED)} > "$out/diff"
if [ -n "$with_pack" ]; then
  {{ echo "$head"; [ -z "$prerequisite" ] || echo "^$prerequisite"; }} |
    "$git" "$@" {" ".join(PACK)}
fi > "$out/pack"
"$git" "$@" diff --name-status --no-renames -z "$base" "$head" -- . \\
  {" ".join(shlex.quote(e) for e in EXCLUDED)} > "$out/changes"
if [ -s "$out/changes" ]; then "$git" "$@" ls-tree -r -l -z "$head"; fi > "$out/tree"
"$git" "$@" diff --name-only --no-renames -z "$base" "$before" -- . \\
  {" ".join(shlex.quote(e) for e in EXCLUDED)} > "$out/committed"
cd "$out"
stat -c %s diff pack changes tree committed
cat diff pack changes tree committed
"""
PARTS = ("diff", "pack", "changes", "tree", "committed")


@dataclass(frozen=True)
class RunOutputs:
    files: list[OutputFile]  # kept whole in task_files
    shown: list[JSON]  # how the report and the artifacts show them
    committed: list[str]  # the paths the run's commits before its last one changed


def _framed(raw: bytes, names: tuple[str, ...]) -> dict[str, bytes]:
    """The parts `OUTPUTS_SCRIPT` sent: their lengths, one a line, then their bytes."""
    lines = raw.split(b"\n", len(names))
    if len(lines) <= len(names) or not all(size.isdigit() for size in lines[: len(names)]):
        raise ValueError("the outputs' lengths were cut short")
    body = lines[len(names)]
    parts: dict[str, bytes] = {}
    at = 0
    for name, size in zip(names, lines[: len(names)], strict=True):
        parts[name] = body[at : at + int(size)]
        at += int(size)
        if len(parts[name]) != int(size):
            raise ValueError(f"the outputs' {name} was cut short")
    return parts


def changed_files(changes: bytes, tree: bytes) -> list[JSON]:
    """Each path the run changed (`diff --name-status -z`): how, and its size now (None once
    deleted), from `ls-tree -r -l -z` of the head."""
    fields = changes.decode(errors="surrogateescape").split("\0")
    listed = [(fields[n], fields[n + 1]) for n in range(0, len(fields) - 1, 2) if fields[n]]
    sizes: dict[str, int] = {}
    for entry in tree.decode(errors="surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        size = meta.split()[-1] if meta else "-"
        if path and size.isdigit():
            sizes[path] = int(size)
    return [
        {"path": path, "change": CHANGES.get(status[:1], status), "size": sizes.get(path)}
        for status, path in listed
    ]


async def results(
    ws: Workspace, view: StepView, config: OutputConfig, *, before: str | None = None
) -> RunOutputs:
    """The run's result files, how its report and artifacts show them, and the paths its
    commits up to `before` (the head before its closing commit; default: the head) changed."""
    head = ws.head()
    base = await start_of(ws, view)
    if head is None or base is None:
        return RunOutputs([], [], [])
    raw = await ws.read_script(*_read(view, base, head, before))
    return outputs_of(raw, view, config, base=base, head=head, before=before)


def _read(
    view: StepView, base: str, head: str, before: str | None, *, pack_here: bool = False
) -> tuple[str, ...]:
    """`OUTPUTS_SCRIPT` and its arguments, for `base`..`head`; `pack_here`: the harness
    writes the run's pack (`run_pack`), git does not."""
    prerequisite = _prerequisite(view)
    return (
        OUTPUTS_SCRIPT,
        base,
        head,
        prerequisite or "",
        before or head,
        "" if pack_here else "pack",
    )


def outputs_read(view: StepView, before: str | None, *, pack_here: bool = False) -> tuple[str, ...]:
    """The read of `results` as a script and its arguments for the run's closing commit to
    run after it, in its box (`Workspace.commit_then_read`; the head is the new commit); none
    where the start is not on record (the closing commit may be the first): `results` then."""
    if view.base_sha is None:
        return ()
    return _read(view, view.base_sha, "HEAD", before, pack_here=pack_here)


def packs_here(ws: Workspace, view: StepView, upto: str | None) -> bool:
    """Whether the harness can write the run's pack (`packs.py`): the commits up to `upto`
    (the head before the closing commit, which adds one of its own) are a line of loose
    commits after the prerequisite."""
    if upto is None or view.base_sha is None:
        return False
    prerequisite = _prerequisite(view)
    return upto == prerequisite or is_loose_line(ws.git_dir, upto, prerequisite)


async def run_pack(ws: Workspace, view: StepView, head: str) -> bytes:
    """The pack of the run's commits up to `head` after the prerequisite: written here, or by
    git where it cannot be after all."""
    return await ws.pack(head, _prerequisite(view))


def outputs_of(
    raw: bytes,
    view: StepView,
    config: OutputConfig,
    *,
    base: str,
    head: str,
    before: str | None,
    pack: bytes | None = None,
) -> RunOutputs:
    """`results` from what `OUTPUTS_SCRIPT` printed (`raw`) for `base`..`head`; `pack`: the
    run's pack where the harness wrote it (the script sent none)."""
    task_id = view.task_id
    prerequisite = _prerequisite(view)
    try:
        parts = _framed(raw, PARTS)
    except ValueError as exc:  # the box's output is ours; this is a broken git, not input
        raise WorkspaceError(f"the run's outputs could not be read: {exc}") from exc
    diff, changed = parts["diff"], changed_files(parts["changes"], parts["tree"])
    bundle = bundle_of(parts["pack"] if pack is None else pack, head, prerequisite)
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
    committed = parts["committed"].decode(errors="surrogateescape").split("\0")
    return RunOutputs(files, shown, [p for p in committed if p] if before else [])


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
