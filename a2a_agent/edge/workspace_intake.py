"""What a task's first message says of its workspace, checked before anything is stored: a
repository to clone (`{"workspace": {"git": {...}}}`), files it carries or points to (A2A
FileParts: single files, or tar/zip archives unpacked), or an earlier task to start from
(`{"workspace": {"fromTask": "<id>"}}`); and where its commits go once it is done
(`{"publish": {"git": {...}}}`).

An inline archive is checked member by member here (`harness/unpack.py`), so a hostile one is
refused at once with the member named, and nothing is stored. The files are kept whole in
`task_files`; the message kept in the task's history links to each instead of holding it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import Message, Part

from a2a_agent.errors import PlanError
from a2a_agent.harness.workspace.unpack import Limits, Member, check_tree, scan
from a2a_agent.sources import (
    WORKSPACE_KEYS,
    SourceRules,
    is_archive,
    parse_git,
    parse_publish,
    safe_relative,
)
from persistence.records import JSON, InputFile, NewTask

FILE_KINDS = ("raw", "url")


def file_parts(message: Message) -> list[tuple[int, Part]]:
    return [(n, p) for n, p in enumerate(message.parts) if p.WhichOneof("content") in FILE_KINDS]


@dataclass(frozen=True)
class Sources:
    """What the message said of the workspace, as the store keeps it."""

    seed: JSON | None = None
    seed_from: str | None = None
    inputs: list[InputFile] = field(default_factory=list)
    publish: JSON | None = None


@dataclass(frozen=True)
class SourceIntake:
    rules: SourceRules = field(default_factory=SourceRules)
    unpack: Limits = field(default_factory=lambda: Limits(5000, 512 << 20))
    max_input_bytes: int = 32 << 20
    public_url: str = "http://127.0.0.1:8000"

    def file_bytes(self, message: Message) -> int:
        return sum(len(p.raw) for _, p in file_parts(message))

    def check_files(self, message: Message) -> None:
        """Files only in a first message, and no more bytes than the server takes."""
        files = file_parts(message)
        if files and message.task_id:
            raise PlanError(
                "files belong to a task's first message (they seed its workspace); a follow-up "
                "carries text or an approval"
            )
        carried = self.file_bytes(message)
        if carried > self.max_input_bytes:
            raise PlanError(
                f"the message's files hold {carried} bytes; at most {self.max_input_bytes} are "
                "taken inline (A2A_AGENT_MAX_INPUT_BYTES): give larger ones by URL"
            )

    def take(self, message: Message, data: Mapping[str, Any]) -> Sources:
        """The workspace's source and the publish target; PlanError naming what is wrong."""
        publish = parse_publish(data["publish"], self.rules) if "publish" in data else None
        files = self._inputs(message)
        workspace = data.get("workspace")
        if workspace is None:
            seed = {"kind": "files", "files": [_listed(f) for f in files]} if files else None
            return Sources(seed=seed, inputs=files, publish=publish)
        if not isinstance(workspace, Mapping) or len(workspace) != 1:
            raise PlanError(
                '"workspace" must be {"git": {"url", "ref", "depth", "credential"}} or '
                '{"fromTask": "<task id>"}'
            )
        (kind,) = workspace
        if kind not in WORKSPACE_KEYS:
            raise PlanError(f'"workspace" has {kind!r}; it takes "git" or "fromTask"')
        if files:
            raise PlanError(
                "the message carries files and names another workspace source; a task starts "
                "from one source"
            )
        if kind == "git":
            git = parse_git(workspace["git"], self.rules, "workspace.git")
            return Sources(seed={"kind": "git", **git}, publish=publish)
        earlier = workspace["from_task"]
        if not isinstance(earlier, str) or not earlier.strip() or len(earlier) > 200:
            raise PlanError('"workspace.fromTask" must be the id of an earlier task of yours')
        return Sources(seed_from=earlier, publish=publish)

    def _inputs(self, message: Message) -> list[InputFile]:
        inputs = []
        # Every name the message's files make, across its parts: a single file must not go
        # under a link or a file an archive of the same message makes.
        made: list[Member] = []
        for index, (n, part) in enumerate(file_parts(message)):
            where = f"part {n} (a file)"
            name = safe_relative(part.filename or f"file-{index}", where)
            media_type = part.media_type or "application/octet-stream"
            if part.WhichOneof("content") == "url":
                self.rules.check_syntax(part.url, where)
                inputs.append(InputFile(str(index), media_type, name, 0, "", url=part.url))
                continue
            body = bytes(part.raw)
            if is_archive(name, media_type):
                made += scan(body, self.unpack, where)
            else:
                made.append(Member(name, "file", len(body)))
            inputs.append(
                InputFile(
                    str(index), media_type, name, len(body), hashlib.sha256(body).hexdigest(),
                    body=body,
                )
            )  # fmt: skip
        check_tree(made, "the message's files")
        return inputs

    async def check_remote(self, new: NewTask) -> None:
        """What needs the network: each URL's host is public (or allowlisted)."""
        if new.seed and new.seed.get("kind") == "git":
            await self.rules.check_url(new.seed["url"], "workspace.git")
        if new.policy.get("publish"):
            await self.rules.check_url(new.policy["publish"]["url"], "publish.git")
        for given in new.inputs:
            if given.url:
                await self.rules.check_file_url(given.url, f"file {given.filename}")

    def history_message(self, first: JSON, task_id: str) -> JSON:
        """The first message as the task's history keeps it: each file a link to its copy."""
        parts = []
        index = 0
        for given in first.get("parts", []):
            kept = dict(given)
            if "raw" in kept:
                del kept["raw"]
                kept["url"] = f"{self.public_url.rstrip('/')}/inputs/{task_id}/{index}"
            if "url" in kept:
                index += 1
            parts.append(kept)
        return {**first, "parts": parts}


def _listed(given: InputFile) -> JSON:
    return {
        "name": given.name,
        "filename": given.filename,
        "media_type": given.media_type,
        "size": given.size,
        "url": given.url,
    }
