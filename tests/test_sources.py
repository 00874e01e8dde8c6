"""Work on the caller's code (issue 14): a workspace seeded from a repository at a ref, from
files the message carries, or from an earlier task; results handed back as a diff, a bundle
and the files changed; commits published to the caller's branch."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
import time
import uuid
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.client import Client
from a2a.helpers.proto_helpers import get_data_parts
from a2a.types.a2a_pb2 import Message, Part, Role, Task, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from tests.support.a2a import a2a_client, item, report_of, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.git_http import git_http_server
from tests.support.processes import StartAgent
from tests.support.secrets import secret
from tests.test_auth import make_key
from tests.test_pauses import approval, request_of

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED
WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def make_repo(root: Path) -> tuple[Path, dict[str, str]]:
    """A bare repository with three commits on main and a tag v1 on the second."""
    work = root / "upstream-work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    shas = {}
    for n, text in enumerate(("one", "two", "three"), 1):
        (work / "README.md").write_text(f"# Service\n\nversion {text}\n")
        (work / "app.py").write_text(f"VERSION = {n}\n")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", f"commit {text}")
        shas[text] = git(work, "rev-parse", "HEAD")
        if text == "two":
            git(work, "tag", "v1")
    bare = root / "upstream.git"
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    return bare, shas


def data_message(payload: dict[str, Any], *parts: Part, text: str | None = None) -> Message:
    value = Value()
    value.struct_value.update(payload)
    extra = [Part(text=text)] if text else []
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(data=value, media_type="application/json"), *extra, *parts],
    )


def artifact(task: Task, name: str) -> Any:
    for found in task.artifacts:
        if found.artifact_id == name:
            return found
    raise AssertionError(f"no {name} artifact in {[a.artifact_id for a in task.artifacts]}")


def file_bytes(task: Task, name: str, url: str) -> bytes:
    """An output artifact's bytes: inline, or fetched from its URL."""
    (part,) = artifact(task, name).parts
    if part.WhichOneof("content") == "raw":
        return bytes(part.raw)
    assert part.url.startswith(url)
    return httpx.get(part.url, timeout=30).raise_for_status().content


def two_file_plan() -> dict[str, Any]:
    return {
        "goal": "bump the service",
        "items": [
            item(
                "readme", "sed -i 's/version two/version four/' README.md", "grep -q four README.md"
            ),
            item("config", "echo 'debug: false' > config.yaml", "test -f config.yaml"),
        ],
    }


def tar_of(files: dict[str, str | None], **links: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            if text is None:
                info.type = tarfile.DIRTYPE
                archive.addfile(info)
                continue
            body = text.encode()
            info.size = len(body)
            archive.addfile(info, io.BytesIO(body))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return out.getvalue()


def tar_part(body: bytes, name: str = "project.tar.gz") -> Part:
    return Part(raw=body, filename=name, media_type="application/gzip")


async def test_a_repository_at_a_ref_gives_a_diff_and_bundle_that_apply(
    start_agent: StartAgent, tmp_path: Path, home: Path
) -> None:
    bare, shas = make_repo(tmp_path)
    server = start_agent("serve", "src-1", A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/")
    seed = {"git": {"url": f"file://{bare}", "ref": "v1"}}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": two_file_plan(), "workspace": seed}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    shown = MessageToDict(done.metadata)["workspace"]
    assert shown == {
        "source": "git",
        "url": f"file://{bare}",
        "ref": "v1",
        "startCommit": shas["two"],
    }
    report = report_of(done)
    assert sorted(report["filesChanged"]) == ["README.md", "config.yaml"]
    (files_part,) = get_data_parts(artifact(done, "files").parts)
    changed = {f["path"]: f for f in files_part["files"]}
    assert changed["README.md"]["change"] == "modified"
    assert changed["config.yaml"] == {"path": "config.yaml", "change": "added", "size": 13.0}
    # The diff applies cleanly to a fresh clone at that ref, and gives the workspace's files.
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(bare), str(fresh))
    git(fresh, "checkout", "-q", "v1")
    diff = file_bytes(done, "diff", server.url)
    (tmp_path / "run.diff").write_bytes(diff)
    git(fresh, "apply", "--check", str(tmp_path / "run.diff"))
    git(fresh, "apply", str(tmp_path / "run.diff"))
    workspace = home / "workspaces" / done.id
    for name in ("README.md", "config.yaml"):
        assert (fresh / name).read_text() == (workspace / name).read_text()
    assert not (fresh / "plan.json").exists()  # the harness's own files stay out of the diff
    # The bundle verifies against that clone (it builds on the start commit) and fetches.
    bundle = tmp_path / "run.bundle"
    bundle.write_bytes(file_bytes(done, "bundle", server.url))
    git(fresh, "bundle", "verify", str(bundle))
    git(fresh, "fetch", "-q", str(bundle), "main:refs/heads/from-agent")
    assert git(fresh, "rev-parse", "from-agent") == git(workspace, "rev-parse", "HEAD")
    assert git(fresh, "merge-base", "from-agent", "v1") == shas["two"]
    # Served by URL too, the same bytes.
    got = httpx.get(f"{server.url}/outputs/{done.id}/diff", timeout=30)
    assert got.status_code == 200 and got.content == diff
    assert got.headers["content-type"].startswith("text/x-diff")
    assert httpx.get(f"{server.url}/outputs/{done.id}/nothing", timeout=30).status_code == 404
    # The caller's repository gets no .gitignore of ours.
    assert ".gitignore" not in git(workspace, "ls-files")


async def test_large_results_are_served_by_url_not_inline(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    bare, _ = make_repo(tmp_path)
    server = start_agent(
        "serve",
        "src-2",
        A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/",
        A2A_AGENT_INLINE_OUTPUT_BYTES="0",
    )
    seed = {"git": {"url": f"file://{bare}", "ref": "v1", "depth": 1}}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": two_file_plan(), "workspace": seed}))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    (part,) = artifact(done, "diff").parts
    assert part.WhichOneof("content") == "url"
    assert part.url == f"{server.url}/outputs/{done.id}/diff"
    (bundle,) = artifact(done, "bundle").parts
    assert bundle.url.endswith("/bundle") and bundle.media_type == "application/x-git-bundle"


async def test_a_tar_archive_seeds_the_workspace(
    start_agent: StartAgent, home: Path, database_url: str
) -> None:
    archive = tar_of({"src": None, "src/app.py": "print('hi')\n", "README.md": "# Tool\n"})
    plan = {
        "goal": "add a test",
        "items": [item("test", "echo 'assert True' > src/test_app.py", "test -f src/test_app.py")],
    }
    server = start_agent("serve", "src-3")
    async with a2a_client(server.url) as client:
        task = await send(client, data_message({"plan": plan}, tar_part(archive)))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert (workspace / "src" / "app.py").read_text() == "print('hi')\n"
    assert MessageToDict(done.metadata)["workspace"]["source"] == "files"
    assert report_of(done)["filesChanged"] == ["src/test_app.py"]
    # The message in the history links to its file instead of holding it.
    (first,) = done.history[:1]
    (linked,) = [p for p in first.parts if p.WhichOneof("content") == "url"]
    assert linked.url.endswith(f"/inputs/{done.id}/0") and linked.filename == "project.tar.gz"
    assert httpx.get(linked.url, timeout=30).content == archive
    (kept,) = rows(
        database_url, "SELECT size FROM task_files WHERE task_id = %s AND kind = 'input'", done.id
    )
    assert kept == (len(archive),)


@pytest.mark.parametrize(
    ("archive", "said"),
    [
        (tar_of({"/etc/evil": "x"}), "has an absolute path"),
        (tar_of({"a/../../evil": "x"}), "climbs out with '..'"),
        (tar_of({}, link="/etc/passwd"), "outside the workspace"),
        (tar_of({f"f{n}": "" for n in range(10_000)}), "10000 members; at most 5000"),
    ],
    ids=["absolute", "dotdot", "symlink-out", "bomb"],
)
async def test_hostile_archives_are_refused_and_nothing_is_stored(
    start_agent: StartAgent, database_url: str, home: Path, archive: bytes, said: str
) -> None:
    server = start_agent("serve", f"src-h-{uuid.uuid4().hex[:6]}")
    plan = {"goal": "g", "items": [item("a", "true", "false")]}
    async with a2a_client(server.url) as client:
        with pytest.raises(InvalidParamsError, match="refused") as refused:
            await send(client, data_message({"plan": plan}, tar_part(archive)))
    assert said in str(refused.value)
    assert rows(database_url, "SELECT count(*) FROM tasks") == [(0,)]
    assert rows(database_url, "SELECT count(*) FROM task_files") == [(0,)]
    assert not (home / "workspaces").exists() or not any((home / "workspaces").iterdir())


async def test_sources_the_server_does_not_allow_are_refused(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    bare, _ = make_repo(tmp_path)
    server = start_agent("serve", "src-4")
    plan = two_file_plan()
    cases = [
        ({"git": {"url": f"file://{bare}", "ref": "main"}}, "file:// URLs are taken only"),
        ({"git": {"url": "https://127.0.0.1/x.git"}}, "loopback, private"),
        ({"git": {"url": "https://u:p@example.com/x.git"}}, "must not carry credentials"),
        ({"git": {"url": "https://example.com/x.git", "ref": "--upload-pack=x"}}, "ref must be"),
        ({"git": {"url": "https://example.com/x.git", "credential": "nope"}}, "not a credential"),
        ({"fromTask": "no-such-task"}, "does not exist"),
    ]
    async with a2a_client(server.url) as client:
        for workspace, said in cases:
            with pytest.raises(InvalidParamsError) as refused:
                await send(client, data_message({"plan": plan, "workspace": workspace}))
            assert said in str(refused.value), (workspace, str(refused.value))


async def wait_waiting(client: Client, task_id: str) -> Task:
    return await wait_for(client, task_id, WAITING, timeout=60)


async def test_publish_is_approved_pushed_once_across_a_crash(
    start_agent: StartAgent, tmp_path: Path, database_url: str
) -> None:
    bare, shas = make_repo(tmp_path)
    git(bare, "config", "core.logAllRefUpdates", "always")
    fault = tmp_path / "fault"
    server = start_agent(
        "serve",
        "src-5",
        A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/",
        A2A_AGENT_FAULT_FILE=str(fault),
    )
    url = f"file://{bare}"
    payload = {
        "plan": two_file_plan(),
        "workspace": {"git": {"url": url, "ref": "v1"}},
        "publish": {"git": {"url": url, "branch": "agent/bump"}},
    }
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(payload))
        waiting = await wait_waiting(client, task.id)
        asked = request_of(waiting)
        assert asked["id"] == "publish" and asked["kind"] == "irreversible_action"
        assert "agent/bump" in asked["summary"]
        fault.write_text("publish-pushed")  # the worker dies right after the push
        await send(client, approval(task.id, "publish", "approve"))
        done = await wait_for(client, task.id, timeout=90)
    assert done.status.state == COMPLETED, done.status.message
    assert not fault.exists()  # the crash happened
    published = MessageToDict(done.metadata)["publish"]
    pushed = git(bare, "rev-parse", "refs/heads/agent/bump")
    assert published["commit"] == pushed and published["result"] == "already"
    # One push: the branch was written once; the run after the crash found it there.
    assert len(git(bare, "reflog", "show", "refs/heads/agent/bump").splitlines()) == 1
    assert rows(
        database_url, "SELECT runs FROM effects WHERE key = %s", f"{done.id}:task:publish"
    ) == [(2,)]
    assert report_of(done)["publish"]["result"] == "already"
    assert git(bare, "merge-base", "agent/bump", "v1") == shas["two"]


async def test_a_diverged_branch_is_reported_not_forced(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    bare, shas = make_repo(tmp_path)
    url = f"file://{bare}"
    server = start_agent("serve", "src-6", A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/")
    payload = {
        "plan": {**two_file_plan(), "policy": {"approvePublish": False}},
        "workspace": {"git": {"url": url, "ref": "v1"}},
        "publish": {"git": {"url": url, "branch": "main"}},  # main moved on past v1
    }
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(payload))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == FAILED
    text = done.status.message.parts[0].text
    assert "not a fast-forward" in text and "nothing forced" in text
    assert git(bare, "rev-parse", "main") == shas["three"]  # untouched
    assert MessageToDict(done.metadata)["publish"]["result"] == "diverged"
    assert artifact(done, "diff") and artifact(done, "bundle")  # the work is still handed back


async def test_from_task_starts_where_the_earlier_one_ended(
    start_agent: StartAgent, home: Path
) -> None:
    server = start_agent("serve", "src-7")
    first_plan = {"goal": "start", "items": [item("a", "echo a > a.txt", "test -f a.txt")]}
    second_plan = {"goal": "go on", "items": [item("b", "cat a.txt > b.txt", "test -s b.txt")]}
    async with a2a_client(server.url) as client:
        first = await wait_for(client, (await send(client, data_message({"plan": first_plan}))).id)
        second = await send(
            client, data_message({"plan": second_plan, "workspace": {"fromTask": first.id}})
        )
        done = await wait_for(client, second.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert (workspace / "b.txt").read_text() == "a\n"
    shown = MessageToDict(done.metadata)["workspace"]
    assert shown["source"] == "from_task" and shown["taskId"] == first.id
    assert report_of(done)["filesChanged"] == ["b.txt"]  # against where the first one ended
    diff = file_bytes(done, "diff", server.url).decode()
    assert "b.txt" in diff and "a.txt" not in diff


def big_repo(root: Path, megabytes: int) -> Path:
    """A bare repository whose one commit holds `megabytes` of random bytes (slow to fetch:
    git hashes every byte)."""
    work = root / "big-work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    with (work / "blob.bin").open("wb") as out:
        out.write(os.urandom(megabytes << 20))
    (work / "README.md").write_text("# Big\n")
    git(work, "-c", "core.compression=0", "add", "-A")
    git(work, "commit", "-q", "-m", "big")
    bare = root / "big.git"
    git(root, "clone", "-q", "--bare", str(work), str(bare))
    return bare


@pytest.mark.processes
@pytest.mark.slow
async def test_kill9_during_a_large_clone_leaves_one_clean_clone(
    start_agent: StartAgent, tmp_path: Path, home: Path, database_url: str
) -> None:
    bare = big_repo(tmp_path, 100)
    allowed = {"A2A_AGENT_GIT_ALLOWED_URLS": f"file://{tmp_path}/"}
    server = start_agent("serve", "src-k", **allowed)
    plan = {"goal": "note", "items": [item("n", "echo done > NOTE", "test -f NOTE")]}
    payload = {"plan": plan, "workspace": {"git": {"url": f"file://{bare}", "ref": "main"}}}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(payload))
    staging = home / "workspaces" / ".seeding" / task.id
    marker = home / "workspaces" / ".effects" / f"{task.id}.json"
    deadline = time.monotonic() + 30
    while ":task:seed" not in (marker.read_text() if marker.exists() else ""):
        assert time.monotonic() < deadline, "the clone never started"
        time.sleep(0.05)
    time.sleep(1.5)  # well inside the fetch (it takes seconds)
    assert staging.exists()
    server.kill()
    server = start_agent("serve", "src-k", **allowed)
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert not staging.exists()
    assert git(workspace, "status", "--porcelain") == ""
    git(workspace, "fsck", "--no-dangling", "--no-progress")
    assert git(workspace, "cat-file", "-s", "HEAD:blob.bin") == str(100 << 20)
    # One clone: the start commit, then the run's own commits on it.
    history = git(workspace, "log", "--format=%s").splitlines()
    assert history[-1] == "big" and history.count("big") == 1
    assert rows(
        database_url, "SELECT runs FROM effects WHERE key = %s", f"{done.id}:task:seed"
    ) == [(2,)]
    # The clone's history stays out of the database: the checkpoints hold the run's commits.
    (largest,) = rows(
        database_url, "SELECT max(length(bundle)) FROM checkpoints WHERE task_id = %s", done.id
    )
    assert largest[0] < 100_000


@pytest.mark.processes
@pytest.mark.slow
async def test_a_lost_workspace_of_a_cloned_repository_is_rebuilt_from_its_source(
    start_agent: StartAgent, tmp_path: Path, home: Path, database_url: str
) -> None:
    bare, shas = make_repo(tmp_path)
    allowed = {"A2A_AGENT_GIT_ALLOWED_URLS": f"file://{tmp_path}/"}
    server = start_agent("serve", "src-l", **allowed)
    plan = {
        "goal": "two steps",
        "items": [
            item("first", "echo 1 > first.txt", "test -f first.txt"),
            item("second", "sleep 2; echo 2 > second.txt", "test -f second.txt"),
        ],
    }
    payload = {"plan": plan, "workspace": {"git": {"url": f"file://{bare}", "ref": "v1"}}}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(payload))
    key = f"{task.id}:second:1:run"
    deadline = time.monotonic() + 60
    while not rows(database_url, "SELECT 1 FROM effects WHERE key = %s", key):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    server.kill()
    shutil.rmtree(home / "workspaces" / task.id)  # a new machine: nothing on disk
    server = start_agent("serve", "src-l", **allowed)
    async with a2a_client(server.url) as client:
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    workspace = home / "workspaces" / done.id
    assert (workspace / "first.txt").exists() and (workspace / "second.txt").exists()
    assert git(workspace, "merge-base", "HEAD", shas["two"]) == shas["two"]
    assert "restored checkpoint" in (workspace / "progress.md").read_text()


async def test_a_named_credential_opens_a_private_repository(
    start_agent: StartAgent, tmp_path: Path, home: Path
) -> None:
    bare, shas = make_repo(tmp_path)
    token = secret(f"tok-{uuid.uuid4().hex}")
    with git_http_server(tmp_path, "agent", token) as base:
        credentials = json.dumps({"upstream": {"username": "agent", "password": token}})
        server = start_agent(
            "serve",
            "src-c",
            A2A_AGENT_GIT_ALLOWED_URLS=f"{base}/",
            A2A_AGENT_GIT_CREDENTIALS=credentials,
        )
        url = f"{base}/{bare.name}"
        async with a2a_client(server.url) as client:
            with_key = data_message(
                {
                    "plan": two_file_plan(),
                    "workspace": {"git": {"url": url, "ref": "v1", "credential": "upstream"}},
                }
            )
            done = await wait_for(client, (await send(client, with_key)).id, timeout=60)
            without = data_message(
                {"plan": two_file_plan(), "workspace": {"git": {"url": url, "ref": "v1"}}}
            )
            refused = await wait_for(client, (await send(client, without)).id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    assert MessageToDict(done.metadata)["workspace"]["startCommit"] == shas["two"]
    workspace = home / "workspaces" / done.id
    config = (workspace / ".git" / "config").read_text()
    assert token not in config and base not in config  # no remote, no secret left behind
    assert refused.status.state == FAILED
    assert "could not be made from the task's source" in refused.status.message.parts[0].text


async def test_the_model_starts_from_what_the_repository_holds(
    start_agent: StartAgent, tmp_path: Path, fake: FakeAnthropic
) -> None:
    bare, _ = make_repo(tmp_path)
    plan = {"goal": "g", "items": [{"id": "n", "title": "Write NOTES", "verify": "test -f NOTES"}]}
    fake.add(
        tool_reply("submit_plan", plan),
        tool_reply("write_file", {"path": "NOTES", "content": "seen\n"}),
        text_reply("Wrote NOTES."),
    )
    server = start_agent(
        "serve", "src-m", A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/", **model_env(fake)
    )
    seed = {"workspace": {"git": {"url": f"file://{bare}", "ref": "v1"}}}
    async with a2a_client(server.url) as client:
        task = await send(client, data_message(seed, text="write NOTES about the service"))
        done = await wait_for(client, task.id, timeout=60)
    assert done.status.state == COMPLETED, done.status.message
    planning = json.dumps(fake.requests[0]["messages"])
    working = json.dumps(fake.requests[1]["messages"])
    for told in (planning, working):
        assert "The repository you work in (2 files tracked)" in told
        assert "app.py" in told and "version two" in told  # the listing and the README
        assert "commit two" in told and "commit three" not in told  # its history, at v1


async def test_a_file_given_by_url_is_fetched(
    start_agent: StartAgent, tmp_path: Path, home: Path
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "project.tar.gz").write_bytes(tar_of({"lib.py": "X = 1\n"}))
    handler = partial(SimpleHTTPRequestHandler, directory=str(served))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        server = start_agent("serve", "src-u", A2A_AGENT_GIT_ALLOWED_URLS=f"{base}/")
        plan = {"goal": "g", "items": [item("t", "cp lib.py lib2.py", "test -f lib2.py")]}
        link = Part(url=f"{base}/project.tar.gz", filename="project.tar.gz")
        elsewhere = Part(url="http://127.0.0.1:9/x.tar.gz", filename="x.tar.gz")
        async with a2a_client(server.url) as client:
            done = await wait_for(
                client, (await send(client, data_message({"plan": plan}, link))).id
            )
            with pytest.raises(InvalidParamsError, match="loopback, private"):
                await send(client, data_message({"plan": plan}, elsewhere))
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert done.status.state == COMPLETED, done.status.message
    assert (home / "workspaces" / done.id / "lib.py").read_text() == "X = 1\n"


async def test_results_are_served_only_to_their_owner(
    start_agent: StartAgent, tmp_path: Path
) -> None:
    server = start_agent("serve", "src-o", A2A_AGENT_INSECURE_OPEN="0")
    alice = make_key(server, "alice", "read", "submit", "run")
    bob = make_key(server, "bob", "read", "submit")
    plan = {"goal": "g", "items": [item("a", "echo a > a.txt", "test -f a.txt")]}
    async with a2a_client(server.url, key=alice) as client:
        done = await wait_for(client, (await send(client, data_message({"plan": plan}))).id)
    url = f"{server.url}/outputs/{done.id}/diff"
    assert httpx.get(url, timeout=30).status_code == 401
    assert httpx.get(url, headers={"Authorization": f"Bearer {bob}"}, timeout=30).status_code == 404
    mine = httpx.get(url, headers={"Authorization": f"Bearer {alice}"}, timeout=30)
    assert mine.status_code == 200 and b"a.txt" in mine.content
