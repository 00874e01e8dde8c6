"""The package as a user gets it: the wheel, installed with its dependencies in a fresh
virtual environment, serves a plan to completion from outside the source tree."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.processes import REPO, free_port

pytestmark = pytest.mark.slow


def run(
    *argv: str | Path, cwd: Path, timeout: float = 300, env: dict[str, str] | None = None
) -> str:
    out = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout,
        check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert out.returncode == 0, f"{argv} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def test_the_wheel_installs_and_serves_from_outside_the_source_tree(
    tmp_path: Path, database_url: str
) -> None:
    # The image's own build steps (deploy/build.sh, which the Dockerfile runs), here without
    # Docker: the wheel, then a fresh virtual environment with it and its dependencies.
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"
    build = REPO / "deploy" / "build.sh"
    run(build, "wheel", REPO, wheels, cwd=tmp_path)
    run(build, "install", wheels, venv, cwd=tmp_path, timeout=600)
    where = run(
        venv / "bin" / "python",
        "-c",
        "import a2a_agent.model, a2a_agent.settings as s, persistence; "
        "print(a2a_agent.__file__); print(s.PACKAGED_CARD.read_text()[:40])",
        cwd=tmp_path,
    )
    assert str(venv) in where.splitlines()[0] and '"name": "a2a-agent"' in where

    port = free_port()
    env = {
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/root"),
        "DATABASE_URL": database_url,
        "A2A_AGENT_HOME": str(tmp_path / "home"),
        "A2A_AGENT_EXECUTOR_ID": "wheel",
    }
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [venv / "bin" / "a2a-agent", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.2)
        # What the operator is told: the banner once started, the model it has (none), and
        # the admin key it made, once.
        said = (tmp_path / "serve.log").read_text()
        assert f"a2a-agent serving on {url}" in said, said
        assert "model: none (ANTHROPIC_API_KEY is unset)" in said
        assert said.count("no API key existed: made an admin key") == 1, said
        card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10).json()
        assert card["name"] == "a2a-agent" and card["supportedInterfaces"]
        plan = {
            "goal": "g",
            "items": [{"id": "a", "run": "echo hi > a.txt", "verify": "test -f a.txt"}],
        }
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"data": {"plan": plan}}],
        }
        # As a user of a fresh install would: with the admin key the first start made.
        key = (tmp_path / "home" / "admin.key").read_text().strip()
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {key}"}
        sent = httpx.post(
            f"{url}/",
            json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                  "params": {"message": message, "configuration": {"returnImmediately": True}}},
            headers=headers,
            timeout=30,
        ).json()  # fmt: skip
        task_id = sent["result"]["task"]["id"]
        deadline = time.monotonic() + 60
        while True:
            got = httpx.post(
                f"{url}/",
                json={"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}},
                headers=headers,
                timeout=10,
            ).json()
            state = got["result"]["status"]["state"]
            if state == "TASK_STATE_COMPLETED":
                break
            assert state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"), got
            assert time.monotonic() < deadline, got
            time.sleep(0.2)
        # The image's health check, as the Dockerfile runs it.
        dockerfile = (REPO / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
        health = json.loads(
            dockerfile.split("HEALTHCHECK", 1)[1].split("CMD", 1)[1].splitlines()[0]
        )
        assert health[0] == "python"
        run(venv / "bin" / "python", *health[1:], cwd=tmp_path, env={"A2A_AGENT_PORT": str(port)})
        # The dashboard's templates came with the wheel: its pages render.
        login = httpx.get(f"{url}/ui/login", timeout=10)
        assert login.status_code == 200 and 'id="key"' in login.text
        ui = httpx.get(f"{url}/ui", cookies={"a2a_agent_key": key}, timeout=10)
        assert ui.status_code == 200 and task_id[:8] in ui.text
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    workspace = tmp_path / "home" / "workspaces" / task_id
    assert (workspace / "a.txt").read_text() == "hi\n"
