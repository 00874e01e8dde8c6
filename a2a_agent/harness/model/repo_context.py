"""What the model is shown of a repository the caller handed over, before it plans or works
an item: its files, its README and its recent history, cut to a token budget
(A2A_AGENT_REPO_CONTEXT_TOKENS). Read from git and the files as they are when the step runs;
the step's result is recorded, so a replay shows the model the same."""

from __future__ import annotations

from a2a_agent.harness.workspace.files import read_regular
from a2a_agent.harness.workspace.workspace import DERIVED_FILES, Workspace

READMES = ("README.md", "README", "README.rst", "README.txt", "readme.md")
HISTORY = 15


async def overview(ws: Workspace, max_chars: int) -> str:
    """The repository in words, at most `max_chars` (empty when there is nothing to show)."""
    if max_chars <= 0 or ws.head() is None:
        return ""
    listed = (await ws.read_git("ls-files", "-z")).decode(errors="replace").split("\0")
    files = [f for f in listed if f and f not in DERIVED_FILES]
    history = (
        await ws.read_git("log", f"-{HISTORY}", "--format=%h %ad %s", "--date=short")
    ).decode(errors="replace")
    readme = ""
    for name in READMES:
        found = read_regular(ws.root / name, max_chars)
        if found is not None:
            readme = f"## {name}\n{found.decode(errors='replace').strip()}"
            break
    # The listing gets half, the README a third, the history the rest.
    shown_files = _cut("\n".join(files), max_chars // 2)
    parts = [
        f"# The repository you work in ({len(files)} files tracked)",
        f"## Files\n{shown_files}",
        _cut(readme, max_chars // 3) if readme else "## README\n(none)",
        f"## Recent history\n{_cut(history.strip(), max_chars // 6)}",
    ]
    return _cut("\n\n".join(parts), max_chars)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 40)].rstrip() + "\n[... cut to fit the context budget]"
