"""The workspace a task starts from: a caller's repository at a ref, or the files its message
carried (an archive unpacked, or single files), made once, as a keyed effect.

The clone or unpack happens in a directory of its own beside the workspaces and is moved into
place whole, so a crash in the middle of a 2 GB clone leaves nothing half-applied: the effect
runs again under its key, clears what the dead run left, and starts over. The start commit is
recorded (`tasks.base_sha`); results are measured against it. A cloned repository's history is
not copied into the checkpoints: they hold the task's own commits, and a restore on another
machine fetches the start commit from the source again (`integrity.py`). Files from the
message become one commit of their own, kept whole in the first checkpoint.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import httpcore

from a2a_agent.budget import Spend
from a2a_agent.delivery.transport import GuardedBackend
from a2a_agent.errors import AgentError, PlanError
from a2a_agent.harness.kernel.context import StepContext
from a2a_agent.harness.kernel.effects import Concluded, Effect, Effects
from a2a_agent.harness.kernel.endings import RunEndings
from a2a_agent.harness.kernel.keys import effect_key
from a2a_agent.harness.kernel.results import JSON, StepResult
from a2a_agent.harness.workspace.git import PACK, bundle_of
from a2a_agent.harness.workspace.unpack import extract, write_file
from a2a_agent.harness.workspace.workspace import DERIVED_FILES, Workspace
from a2a_agent.sources import file_refused, is_archive, safe_relative
from persistence.records import Checkpoint, InputFile, StepRecord, StepView, Transition

SEED_MESSAGE = "Seed: the files the task's message carried"


class SeedError(AgentError):
    """The workspace could not be made from the task's source; the run fails saying why."""


class Seeder:
    def __init__(self, ctx: StepContext, effects: Effects, endings: RunEndings) -> None:
        self.ctx = ctx
        self.effects = effects
        self.endings = endings
        self.remote = ctx.config.remote

    def needs_seed(self, view: StepView) -> bool:
        kind = (view.seed or {}).get("kind")
        return kind in ("git", "files") and view.base_sha is None

    async def seed(self, task_id: str) -> StepResult:
        """Make the workspace from the task's source, once (`ok`; `failed` if it cannot be)."""
        key = effect_key(task_id, "seed")
        view = await self.ctx.view(task_id, key=key, budget=True)
        seed = dict(view.seed or {})
        effect = Effect(
            key=key, step="seed", item_id=None, attempt=None, spend=Spend(), integrity="none"
        )

        async def perform() -> JSON:
            return await self._make(view, seed, key)

        async def conclude(value: JSON, runs: int) -> Concluded:
            return await self._concluded(view, seed, key, value, runs)

        return await self.effects.run(view, effect, perform, conclude)

    # ---- making it --------------------------------------------------------------------------

    async def _make(self, view: StepView, seed: JSON, key: str) -> JSON:
        task_id = view.task_id
        staging = self.ctx.config.workspaces / ".seeding" / task_id
        root = self.ctx.workspace(task_id).root
        # What a run cut short left (the clone in progress, or one moved in but not recorded).
        await asyncio.to_thread(_remove, staging, root)
        staging.mkdir(parents=True)
        try:
            if seed["kind"] == "git":
                commit = await self.remote.fetch_into(
                    staging,
                    seed["url"],
                    seed["ref"],
                    depth=seed.get("depth"),
                    credential=seed.get("credential"),
                )
                found: JSON = {"commit": commit}
            else:
                files = await self._unpack(task_id, staging)
                ws = self._workspace(staging)
                await ws.ensure()
                commit, _ = await ws.commit(SEED_MESSAGE, key, None)
                found = {"commit": commit, "files": files}
        except (AgentError, PlanError) as exc:
            await asyncio.to_thread(_remove, staging)
            return {"error": str(exc)}
        except BaseException:
            await asyncio.to_thread(_remove, staging)
            raise
        clashing = [name for name in DERIVED_FILES if (staging / name).exists()]
        if clashing:
            await asyncio.to_thread(_remove, staging)
            return {
                "error": f"the source has its own {' and '.join(clashing)} at the top level, "
                "where a2a-agent keeps the plan and the progress log; rename or move it"
            }
        os.replace(staging, root)
        return found

    def _workspace(self, root: Path) -> Workspace:
        sandbox = self.ctx.config.sandbox
        return Workspace(
            root,
            git_timeout_s=self.ctx.config.git_timeout_s,
            sandbox=sandbox if sandbox.enabled else None,
        )

    async def _unpack(self, task_id: str, target: Path) -> int:
        """The message's files into `target`: archives unpacked, others written as named."""
        written = 0
        for n, given in enumerate(await self.ctx.runs.input_files(task_id)):
            where = f"file {n} ({given.filename or given.name})"
            body = given.body if given.body is not None else await self._download(given, where)
            if is_archive(given.filename, given.media_type):
                limits = self.ctx.config.unpack
                written += await asyncio.to_thread(extract, body, target, limits, where)
                continue
            name = safe_relative(given.filename or f"file-{n}", where)
            await asyncio.to_thread(write_file, target, name, body, where)
            written += 1
        return written

    async def _download(self, given: InputFile, where: str) -> bytes:
        """A file given by URL: fetched once, guarded as a webhook is, capped in size."""
        url = str(given.url)
        rules = self.remote.rules
        await rules.check_file_url(url, where)
        backend = None if rules.listed(url) else GuardedBackend(rules.allow_hosts, file_refused)
        limit = self.ctx.config.max_download_bytes
        timeout = {"connect": 30.0, "read": 60.0, "write": 30.0, "pool": 30.0}
        body = bytearray()
        try:
            async with (
                httpcore.AsyncConnectionPool(network_backend=backend) as pool,
                pool.stream("GET", url, extensions={"timeout": timeout}) as response,
            ):
                if response.status != 200:
                    raise SeedError(f"{where}: GET {_shown(url)} answered {response.status}")
                async for chunk in response.aiter_stream():
                    body += chunk
                    if len(body) > limit:
                        raise SeedError(
                            f"{where}: {_shown(url)} is larger than {limit} bytes "
                            "(A2A_AGENT_MAX_INPUT_BYTES)"
                        )
        except httpcore.TimeoutException:
            raise SeedError(f"{where}: {_shown(url)} did not answer in time") from None
        except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
            raise SeedError(f"{where}: could not fetch {_shown(url)}: {exc}") from None
        return bytes(body)

    # ---- its record ---------------------------------------------------------------------

    async def _concluded(
        self, view: StepView, seed: JSON, key: str, value: JSON, runs: int
    ) -> Concluded:
        if "error" in value:
            why = f"the workspace could not be made from the task's source: {value['error']}"
            record = StepRecord(
                effect_key=key,
                step="seed",
                result=value,
                task_state="failed",
                status_text=f"Failed: {why}",
                transitions=[Transition(to_state="failed", reason=why[:1000])],
                report={**await self.endings.report(view), "seed": {"error": value["error"]}},
                runs=runs,
            )
            return Concluded(record, StepResult("failed"), fingerprint=False)
        commit = str(value["commit"])
        ws = self.ctx.workspace(view.task_id)
        if seed["kind"] == "git":
            # The clone's history stays out of the database: its checkpoint is the start
            # commit alone, and a restore fetches that from the source again.
            empty = await ws.read_git(*PACK, stdin=f"{commit}\n^{commit}\n".encode())
            checkpoint = Checkpoint(sha=commit, bundle=bundle_of(empty, commit, commit))
            shown = {
                "source": "git",
                "url": seed["url"],
                "ref": seed["ref"],
                "start_commit": commit,
            }
            said = f"cloned {seed['url']} at {seed['ref']} ({commit[:12]})"
        else:
            # Files: their commit is the task's own, so the first checkpoint holds it whole.
            sha, bundle = await ws.commit(SEED_MESSAGE, key, None)
            checkpoint = Checkpoint(sha=sha, bundle=bundle or b"")
            shown = {"source": "files", "files": value.get("files"), "start_commit": commit}
            said = f"made from the message's files ({value.get('files')} file(s), {commit[:12]})"
        record = StepRecord(
            effect_key=key,
            step="seed",
            result=value,
            base_sha=commit,
            seed_patch={"commit": commit},
            metadata_patch={"workspace": shown},
            checkpoint=checkpoint,
            transitions=[
                Transition(to_state=view.state, from_state=view.state, reason=f"workspace {said}")
            ],
            runs=runs,
        )
        return Concluded(record, StepResult.ok({"commit": commit}))


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)


def _shown(url: str) -> str:
    """A URL as errors show it: without a query string (it may hold a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
