"""Nothing a command plants in a workspace's `.git` runs during the harness's own git calls.

A command may write anything in its workspace, `.git` included: hooks, the repository's
config (a filter driver, `core.fsmonitor`, `diff.external`, a textconv, `core.pager`, a
credential helper, aliases, an editor, `include.path`, an `insteadOf` to `ext::` or ssh with
`core.sshCommand`, `gpg.program`), a `commondir` that sends git to another config, a `.git`
that is a gitfile or a link. Each test below plants one setting the way a command does (a
shell in the task's box, the workspace's git), checks that the plant is live (plain git on a
copy runs it), then drives every harness git call it could reach: a step's commit and bundle,
the end of a run (diff, bundle, files changed), the repository overview, a bisect probe's
export, a patch applied, the check-and-restore of a workspace, and a publish to a local bare
repository (or, for the credential helper, to an HTTP server asking for one); and asserts
that the planted program never ran, boxed or not, and that the commits are right.

The planted programs write a marker into a directory every box may write (the operator's
shared directory), so a run inside the box would be seen too.
"""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, TaskState
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Value

from a2a_agent.harness.checks.reverify import probe_folder, remove_probe
from a2a_agent.harness.kernel import outputs
from a2a_agent.harness.model import repo_context
from a2a_agent.harness.workspace.git import GIT, REPOSITORY_CONFIG
from a2a_agent.harness.workspace.git_remote import GitRemote, RemoteError
from a2a_agent.harness.workspace.sandbox import Sandbox
from a2a_agent.harness.workspace.workspace import Workspace, WorkspaceError
from a2a_agent.sources import SourceRules
from persistence.records import StepView
from tests.support.a2a import a2a_client, item, send, wait_for
from tests.support.processes import StartAgent

HOOKS = (
    "applypatch-msg pre-applypatch post-applypatch pre-commit pre-merge-commit "
    "prepare-commit-msg commit-msg post-commit pre-rebase post-checkout post-merge pre-push "
    "pre-receive update proc-receive post-receive post-update reference-transaction "
    "push-to-checkout pre-auto-gc post-rewrite fsmonitor-watchman post-index-change"
)
# A command's own shell: `evil NAME` makes a program that leaves the marker NAME in $SEEN and
# fails (it reads nothing: git may wait for its answer with the input still open), and prints
# its path.
PRELUDE = r"""set -e
evil() {
  mkdir -p "$PWD/.git/planted"
  printf '#!/bin/sh\ntouch "%s/%s"\nexit 1\n' "$SEEN" "$1" > "$PWD/.git/planted/$1"
  chmod +x "$PWD/.git/planted/$1"
  echo "$PWD/.git/planted/$1"
}
"""
GITFILE = 'echo "gitdir: $PWD/evil.git" > .git\n'
CHANGE = "echo 'changed by the command' >> work.txt\n"


@dataclass(frozen=True)
class Plant:
    script: str  # run in the workspace, in its box, as a command would
    control: str | None  # plain git (no harness options) that runs the plant, on a copy


PLANTS: dict[str, Plant] = {
    "hooks": Plant(
        f'for h in {HOOKS}; do cp "$(evil hook-$h)" .git/hooks/$h; done\n'
        "mkdir -p .git/other-hooks; cp .git/hooks/* .git/other-hooks/\n"
        "git config core.hooksPath .git/other-hooks\n",
        "git commit -q --allow-empty -m control",
    ),
    "core.fsmonitor": Plant(
        'git config core.fsmonitor "$(evil fsmonitor)"\n', "git status --porcelain"
    ),
    "core.sshCommand": Plant(
        'git config core.sshCommand "$(evil ssh)"\n'
        'git config url."ssh://git@example.invalid/r".insteadOf "$PUBLISH"\n'
        'git config url."ssh://git@example.invalid/r".pushInsteadOf "$PUBLISH"\n',
        'git ls-remote "$PUBLISH"',
    ),
    "url.insteadOf ext::": Plant(
        "git config protocol.ext.allow always\nevil ext > /dev/null\n"
        'git config url."ext::sh -c touch% $SEEN/ext% >&2".insteadOf "$PUBLISH"\n',
        'git ls-remote "$PUBLISH"',
    ),
    "diff.external": Plant(
        'git config diff.external "$(evil external-diff)"\n', "git diff HEAD~ HEAD"
    ),
    "filter": Plant(
        'git config filter.evil.clean "$(evil clean)"\n'
        'git config filter.evil.smudge "$(evil smudge)"\n'
        "git config filter.evil.required true\n"
        "echo '* filter=evil' > .gitattributes\n"
        "echo '* filter=evil' > .git/info/attributes\n",
        "git add -A",
    ),
    "filter.process": Plant(
        'git config filter.evil.process "$(evil process)"\n'
        "echo '* filter=evil' > .git/info/attributes\n",
        "git add -A",
    ),
    "textconv": Plant(
        'git config diff.evil.textconv "$(evil textconv)"\n'
        'git config diff.evil.command "$(evil diff-command)"\n'
        "echo '* diff=evil' > .git/info/attributes\n",
        "git diff HEAD~ HEAD",
    ),
    "core.pager": Plant(
        'git config core.pager "$(evil pager)"\n'
        'for c in diff log show archive; do git config pager.$c "$(evil pager-$c)"; done\n',
        "script -qec 'git log -1' /dev/null",
    ),
    "credential.helper": Plant(
        'git config credential.helper "!$(evil credential)"\n'
        'git config core.askPass "$(evil askpass)"\n',
        'git ls-remote "$HTTP_URL"',
    ),
    "alias": Plant(
        "for c in add commit pack-objects archive diff rev-list rev-parse log cat-file "
        "ls-files ls-tree apply reset clean fetch init checkout push ls-remote planted; do "
        'git config alias.$c "!$(evil alias-$c)"; done\n',
        "git planted",
    ),
    "core.editor": Plant(
        'git config core.editor "$(evil editor)"\n'
        'git config sequence.editor "$(evil sequence-editor)"\n',
        "git commit -q --allow-empty",
    ),
    "gpg.program": Plant(
        'git config gpg.program "$(evil gpg)"\ngit config commit.gpgSign true\n'
        "git config log.showSignature true\n",
        "git commit -q --allow-empty -m control",
    ),
    "include.path": Plant(
        'printf "[filter \\"evil\\"]\\n\\tclean = %s\\n" "$(evil include)" > .git/planted.cfg\n'
        "git config include.path planted.cfg\n"
        'git config "includeIf.gitdir:$PWD/.git.path" planted.cfg\n'
        "echo '* filter=evil' > .git/info/attributes\n",
        "git add -A",
    ),
    "commondir": Plant(
        "cp -r .git /tmp/common && mv /tmp/common .git/common\n"
        'git config -f .git/common/config filter.evil.clean "$(evil commondir)"\n'
        "echo '* filter=evil' > .git/common/info/attributes\n"
        'echo "$PWD/.git/common" > .git/commondir\n',
        "git add -A",
    ),
}


@dataclass
class Setup:
    ws: Workspace
    box: Sandbox
    seen: Path
    seed: str
    first: str
    bundles: list[bytes]
    remote: GitRemote
    bare: Path
    publish_url: str
    http_url: str


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="planted"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/repo.git"
    server.shutdown()
    server.server_close()
    thread.join()


def _plain_env(root: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CEILING_DIRECTORIES": str(root.parent),
        "GIT_AUTHOR_NAME": "command",
        "GIT_AUTHOR_EMAIL": "command@localhost",
        "GIT_COMMITTER_NAME": "command",
        "GIT_COMMITTER_EMAIL": "command@localhost",
        "GIT_TERMINAL_PROMPT": "0",
        **extra,
    }


def in_box(
    s: Setup, root: Path, script: str, *, also: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """`script` as a command runs it: in `root`'s box (and `also` in it), with git as the
    command has it."""
    env = _plain_env(root, SEEN=str(s.seen), PUBLISH=s.publish_url, HTTP_URL=s.http_url)
    return subprocess.run(
        Sandbox(shared=(s.seen, *also), network=True).wrap(["/bin/sh", "-c", script], root),
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _setup(tmp_path: Path, boxed: bool, http_url: str) -> Setup:
    seen = tmp_path / "seen"
    seen.mkdir()
    box = Sandbox(shared=(seen,))
    ws = Workspace(tmp_path / "ws" / "task", sandbox=box if boxed else None)
    await ws.ensure()
    (ws.root / "work.txt").write_text("seed\n")
    seed, seed_bundle = await ws.commit("Seed", "t:seed", None)
    (ws.root / "work.txt").write_text("seed\nfirst step\n")
    first, first_bundle = await ws.commit("First step", "t:a:1:run_item", seed)
    assert seed_bundle is not None and first_bundle is not None
    bare = tmp_path / "published.git"
    subprocess.run([GIT, "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    publish_url = f"file://{bare}"
    rules = SourceRules(allowed_prefixes=(publish_url, http_url))
    return Setup(
        ws, box, seen, seed, first, [seed_bundle, first_bundle],
        GitRemote(rules, box, timeout_s=60), bare, publish_url, http_url,
    )  # fmt: skip


def _markers(s: Setup) -> list[str]:
    return _markers_in(s.seen)


def _markers_in(seen: Path) -> list[str]:
    return sorted(os.listdir(seen))


async def _drive(s: Setup, name: str) -> str:
    """Every harness git call a plant could reach, in a run's order; the last commit."""
    ws = s.ws
    head, bundle = await ws.commit("Planted step", "t:plant:1:run_item", s.first)
    assert bundle is not None and head != s.first
    s.bundles.append(bundle)
    assert await ws.has_commit(head)
    assert await ws.fingerprint() != "missing"
    view = StepView(
        task_id="t", state="working", goal="", items=[], fingerprint=None,
        checkpoint_sha=head, seed={"kind": "files"}, base_sha=s.seed,
    )  # fmt: skip
    made = await outputs.results(ws, view, outputs.OutputConfig("http://x", 0), before=s.first)
    assert b"changed by the command" in made.files[0].body
    assert {f["path"] for f in made.shown[2]["files"]} >= {"work.txt"}
    assert made.committed == ["work.txt"]
    assert "work.txt" in await repo_context.overview(ws, 4000)
    # A bisect: the commits after the seed, whose made them, and a probe's export.
    assert await ws.commits_after(s.seed, head) == [s.first, head]
    assert await ws.commit_key(head) == "t:plant:1:run_item"
    where = ws.root / probe_folder(s.first)
    await ws.export(s.first, where)
    assert (where / "work.txt").read_text() == "seed\nfirst step\n"
    remove_probe(ws.root)
    # A delegate's diff applied, and the step's commit.
    patch = (
        b"--- a/work.txt\n+++ b/work.txt\n@@ -1,2 +1,2 @@\n-seed\n+seed (patched)\n first step\n"
    )
    assert await ws.apply_patch(patch) is None
    last, bundle = await ws.commit("Patched", "t:b:1:delegate_item", head)
    assert bundle is not None
    s.bundles.append(bundle)
    # A workspace changed outside the run, put back from its checkpoint.
    (ws.root / "stray.txt").write_text("stray\n")
    await ws.restore(last, s.bundles)
    assert not (ws.root / "stray.txt").exists()
    # Publishing, never forced, to the caller's branch.
    if name != "credential.helper":
        pushed = await s.remote.push(ws.root, s.publish_url, "main", last, credential=None)
        assert pushed.result == "pushed", pushed
    else:
        with pytest.raises(RemoteError, match=r"terminal prompts disabled|Authentication"):
            await s.remote.push(ws.root, s.http_url, "main", last, credential=None)
    return last


async def _check_commits(s: Setup, last: str, name: str) -> None:
    """The commits hold what the files held: no filter changed them, nothing else crept in."""
    env = _plain_env(s.ws.root)
    tree = subprocess.run(
        [GIT, "-c", "core.hooksPath=/dev/null", "ls-tree", "-r", "--name-only", last],
        cwd=s.ws.root, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert "work.txt" in tree and not any(p.startswith(".git/") for p in tree)
    blob = subprocess.run(
        [GIT, "cat-file", "blob", f"{last}:work.txt"],
        cwd=s.ws.root, env=env, capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert blob == b"seed (patched)\nfirst step\nchanged by the command\n"
    assert (s.ws.root / "work.txt").read_bytes() == blob
    if name != "credential.helper":
        published = subprocess.run(
            [GIT, "--git-dir", str(s.bare), "rev-parse", "refs/heads/main"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        assert published == last
    # The checkpoints rebuild the same history in a fresh repository.
    rebuilt = Workspace(s.ws.root.parent / "rebuilt", sandbox=s.ws.sandbox)
    await rebuilt.restore(last, s.bundles)
    assert (rebuilt.root / "work.txt").read_bytes() == blob


@pytest.mark.parametrize("boxed", [True, False], ids=["boxed", "unboxed"])
@pytest.mark.parametrize("name", list(PLANTS))
async def test_a_planted_setting_never_runs_in_a_harness_git_call(
    name: str, boxed: bool, tmp_path: Path, http_url: str
) -> None:
    s = await _setup(tmp_path, boxed, http_url)
    plant = PLANTS[name]
    planted = in_box(s, s.ws.root, PRELUDE + plant.script + CHANGE)
    assert planted.returncode == 0, planted.stderr
    assert _markers(s) == []
    if plant.control is not None:  # the plant is live: plain git on a copy runs it
        copy = tmp_path / "ws" / "copy"
        shutil.copytree(s.ws.root, copy, symlinks=True)
        ran = in_box(s, copy, plant.control, also=(s.ws.root,))  # its programs
        assert _markers(s) != [], (ran.stdout, ran.stderr)
        for marker in _markers(s):
            (s.seen / marker).unlink()
    last = await _drive(s, name)
    assert _markers(s) == []
    assert (s.ws.git_dir / "config").read_bytes() == REPOSITORY_CONFIG
    await _check_commits(s, last, name)


@pytest.mark.parametrize("kind", ["gitfile", "symlink"])
async def test_a_git_dir_elsewhere_is_never_followed(
    kind: str, tmp_path: Path, http_url: str
) -> None:
    """`.git` swapped for a gitfile or a link to a repository the command made (with a filter
    in its config): git would use that repository. The harness removes it (not following
    it), its git finds no repository and fails, and the checkpoints bring the workspace back."""
    s = await _setup(tmp_path, True, http_url)
    script = (
        PRELUDE + CHANGE + "cp -r .git evil.git\n"
        'git --git-dir=evil.git config filter.evil.clean "$(evil elsewhere)"\n'
        "echo '* filter=evil' > evil.git/info/attributes\nrm -rf .git\n"
        + (
            'echo "gitdir: $PWD/evil.git" > .git\n'
            if kind == "gitfile"
            else "ln -s evil.git .git\n"
        )
    )
    planted = in_box(s, s.ws.root, script)
    assert planted.returncode == 0, planted.stderr
    with pytest.raises(WorkspaceError):
        await s.ws.commit("Planted step", "t:plant:1:run_item", s.first)
    assert _markers(s) == []
    # Not followed: the link or gitfile is gone (a folder may stand in its place).
    assert not s.ws.git_dir.is_symlink() and not s.ws.git_dir.is_file()
    assert (s.ws.root / "evil.git" / "config").is_file()  # what it named is left alone
    await s.ws.restore(s.first, s.bundles)
    assert s.ws.head() == s.first
    assert (s.ws.root / "work.txt").read_text() == "seed\nfirst step\n"
    assert _markers(s) == []


async def test_the_config_the_harness_owns_is_what_git_init_writes(tmp_path: Path) -> None:
    """`REPOSITORY_CONFIG` is a fresh repository's config with this git: writing it back
    changes nothing the harness or git relies on."""
    subprocess.run([GIT, "init", "-q", "-b", "main", str(tmp_path / "r")], check=True,
                   env=_plain_env(tmp_path / "r"))  # fmt: skip
    assert (tmp_path / "r" / ".git" / "config").read_bytes() == REPOSITORY_CONFIG


async def test_a_nested_repository_filter_runs_only_in_the_box(
    tmp_path: Path, http_url: str
) -> None:
    """The one plant that does run: `git add -A` asks `git status` of a checked-out nested
    repository (a gitlink), and that git reads the nested repository's own config; git has
    no switch to skip it. So the harness's commit runs in the box: the filter runs as the
    command that planted it could have run it anyway, in the box's own process namespace,
    never the server's."""
    s = await _setup(tmp_path, True, http_url)
    made = in_box(
        s, s.ws.root,
        "set -e; git init -q -b main sub; cd sub; echo s > s; git add s; git commit -qm s",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    head, _ = await s.ws.commit("Nested", "t:n:1:run_item", s.first)
    # The filter writes down the process namespace it runs in, then fails (as `evil` does).
    planted = in_box(
        s, s.ws.root / "sub",
        "set -e; mkdir -p .git/planted\n"
        "printf '#!/bin/sh\\nreadlink /proc/self/ns/pid > \"%s/nested\"\\nexit 1\\n' "
        "\"$SEEN\" > .git/planted/nested\n"
        "chmod +x .git/planted/nested\n"
        "git config filter.evil.clean \"$PWD/.git/planted/nested\"\n"
        "echo '* filter=evil' > .git/info/attributes\ntouch s\n",
    )  # fmt: skip
    assert planted.returncode == 0, planted.stderr
    await s.ws.commit("After", "t:n:2:run_item", head)
    assert _markers(s) == ["nested"]  # it ran: git's, not ours, to decide
    ran_in = (s.seen / "nested").read_text().strip()
    assert ran_in.startswith("pid:[") and ran_in != os.readlink("/proc/self/ns/pid")


async def test_a_run_whose_command_plants_everything_runs_none_of_it(
    start_agent: StartAgent, tmp_path: Path, home: Path
) -> None:
    """In situ: a cloned repository, an item whose command plants every setting above, a
    later item, the end of the run (diff, bundle) and a publish to a local bare repository."""
    seen = tmp_path / "seen"  # under the home's parent: shared with every box by the tests
    seen.mkdir()
    upstream = tmp_path / "upstream.git"
    work = tmp_path / "upstream-work"
    env = _plain_env(work)
    subprocess.run([GIT, "init", "-q", "-b", "main", str(work)], check=True, env=env)
    (work / "work.txt").write_text("seed\n")
    for args in (["add", "-A"], ["commit", "-qm", "seed"]):
        subprocess.run([GIT, *args], cwd=work, check=True, env=env)
    subprocess.run([GIT, "clone", "-q", "--bare", str(work), str(upstream)], check=True, env=env)
    url = f"file://{upstream}"
    server = start_agent("serve", "planted-1", A2A_AGENT_GIT_ALLOWED_URLS=f"file://{tmp_path}/")
    plants = "".join(PLANTS[name].script for name in PLANTS)
    plant = f"SEEN={seen}; PUBLISH={url}; HTTP_URL=http://127.0.0.1:9/r\n{PRELUDE}{plants}{CHANGE}"
    payload = {
        "plan": {
            "goal": "plant everything, then work on",
            "items": [
                item("plant", plant, "grep -q 'changed by the command' work.txt"),
                item("next", "echo 'a later item' >> work.txt", "grep -q later work.txt"),
            ],
            "policy": {"approvePublish": False},
        },
        "workspace": {"git": {"url": url, "ref": "main"}},
        "publish": {"git": {"url": url, "branch": "agent/planted"}},
    }
    value = Value()
    value.struct_value.update(payload)
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(data=value, media_type="application/json")],
    )
    async with a2a_client(server.url) as client:
        task = await send(client, message)
        done = await wait_for(client, task.id, timeout=120)
    assert done.status.state == TaskState.TASK_STATE_COMPLETED, done.status
    assert _markers_in(seen) == []
    ws = home / "workspaces" / done.id
    assert (ws / ".git" / "config").read_bytes() == REPOSITORY_CONFIG
    assert (ws / ".git" / "hooks" / "pre-commit").is_file()  # planted, never run
    published = subprocess.run(
        [GIT, "--git-dir", str(upstream), "rev-parse", "refs/heads/agent/planted"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert MessageToDict(done.metadata)["publish"]["result"] == "pushed"
    blob = subprocess.run(
        [GIT, "--git-dir", str(upstream), "cat-file", "blob", f"{published}:work.txt"],
        env=env, capture_output=True, check=True,
    ).stdout  # fmt: skip
    assert blob == b"seed\nchanged by the command\na later item\n"
    (diff,) = [a for a in done.artifacts if a.artifact_id == "diff"]
    assert diff.parts
