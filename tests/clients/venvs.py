"""Virtual environments for other projects' A2A clients, one per client spec.

Each is made with the machine's Python from the package index, once: under a file lock (the
suite runs in two processes), in a temporary directory renamed into place only when every
package installed, so a killed build never leaves a half environment that looks done. They
are kept between runs under `$A2A_AGENT_CLIENT_VENVS`, else
`~/.cache/a2a-agent/client-venvs/<name>-<hash of the pins>`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

DONE = "a2a-agent-client-venv.json"  # written last, inside the temporary directory


@dataclass(frozen=True)
class ClientSpec:
    """A client's environment: a name and the pinned requirements pip installs."""

    name: str
    requirements: tuple[str, ...]
    pip_args: tuple[str, ...] = ()

    def digest(self, python: Path) -> str:
        version = subprocess.run(
            [str(python), "-c", "import sys; print(sys.version)"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        text = json.dumps([self.requirements, self.pip_args, version])
        return hashlib.sha256(text.encode()).hexdigest()[:12]


# Pinned to what pip resolved on 2026-12-03 (`pip index versions NAME`); the a2a-sdk pin
# beside a framework says which protocol its client speaks.
A2A_SDK_03 = ClientSpec("a2a-sdk-0.3", ("a2a-sdk[http-server]==0.3.26",))
ADK_A2A_1 = ClientSpec("adk-a2a1", ("google-adk[a2a]==2.13.0", "a2a-sdk==1.3.0"))
ADK_A2A_03 = ClientSpec("adk-a2a03", ("google-adk[a2a]==2.13.0", "a2a-sdk==0.3.26"))
STRANDS = ClientSpec("strands", ("strands-agents[a2a]==1.62.0",))
CREWAI = ClientSpec("crewai", ("crewai[a2a]==1.15.30",))
# No `--pre`: the exact pin admits its prerelease, while `--pre` lets pip take httpx 1.0.dev
# (no `httpx.AsyncClient`: a2a-sdk fails on import) and a protobuf rc.
AGENT_FRAMEWORK = ClientSpec("agent-framework", ("agent-framework-a2a==1.0.0b261022",))
FASTA2A = ClientSpec("fasta2a", ("fasta2a==2.1.1", "httpx"))


def base_python() -> Path:
    """The interpreter our own venv was made from (the machine's Python)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return Path(base)


def cache_root() -> Path:
    configured = os.environ.get("A2A_AGENT_CLIENT_VENVS")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "a2a-agent" / "client-venvs"


class VenvBuildError(RuntimeError):
    pass


def _run(args: list[str], what: str, timeout: float) -> None:
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        raise VenvBuildError(f"{what}: no result after {timeout:.0f} s") from e
    if done.returncode != 0:
        said = "\n".join(
            line
            for line in (done.stdout + done.stderr).splitlines()
            if "WARNING: Location" not in line  # the machine's pip.conf names absent mirrors
        )
        raise VenvBuildError(f"{what} exited {done.returncode}:\n{said[-4000:]}")


def built_once(final: Path, make: Callable[[Path], None]) -> Path:
    """`final`, made by `make(build_dir)` first if needed: under a file lock (the other test
    process waits for the build), in a directory renamed into place only once `make` is
    done, so a killed build never leaves a half one that looks done."""
    root = final.parent
    root.mkdir(parents=True, exist_ok=True)
    if (final / DONE).exists():
        return final
    with (root / f"{final.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (final / DONE).exists():
            return final
        for stale in root.glob(f".build-{final.name}-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a build killed before its rename
        if final.exists():  # a directory without the marker was never finished
            shutil.rmtree(final)
        build = root / f".build-{final.name}-{uuid.uuid4().hex[:8]}"
        try:
            make(build)
            (build / DONE).write_text(json.dumps({"built": final.name}))
            os.rename(build, final)
        finally:
            shutil.rmtree(build, ignore_errors=True)
    return final


def ensure_venv(spec: ClientSpec, *, timeout: float = 1800) -> Path:
    """The Python of `spec`'s environment, made first if needed. Raises VenvBuildError."""
    python = base_python()

    def make(build: Path) -> None:
        # Without pip of its own (ensurepip is the slowest part): our pip installs into it.
        _run([str(python), "-m", "venv", "--without-pip", str(build)], f"{python} -m venv", 300)
        # Only `bin/python` is used afterwards: console scripts keep the build path in their
        # shebang, but the interpreter finds its site-packages from where it is.
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(build / "bin" / "python"),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *spec.pip_args,
                *spec.requirements,
            ],
            f"pip install {' '.join(spec.requirements)} (is the package index reachable?)",
            timeout,
        )

    final = built_once(cache_root() / f"{spec.name}-{spec.digest(python)}", make)
    return final / "bin" / "python"


def ensure_node_modules(package_dir: Path, *, timeout: float = 900) -> Path:
    """A directory holding `package_dir`'s package.json and its pinned npm packages (from the
    npm registry, once), in which its scripts run. Raises VenvBuildError."""
    manifest = (package_dir / "package.json").read_text()
    digest = hashlib.sha256(manifest.encode()).hexdigest()[:12]

    def make(build: Path) -> None:
        build.mkdir(parents=True)
        (build / "package.json").write_text(manifest)
        _run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(build)],
            "npm install (is the npm registry reachable?)",
            timeout,
        )

    final = built_once(cache_root() / f"node-{package_dir.name}-{digest}", make)
    for script in package_dir.glob("*.mjs"):  # the scripts beside their node_modules
        shutil.copyfile(script, final / script.name)
    return final


def client_python(spec: ClientSpec) -> Path:
    """For tests: the environment's Python, or a failed test saying why (never a skip)."""
    try:
        return ensure_venv(spec)
    except VenvBuildError as e:
        pytest.fail(f"could not make the {spec.name} client environment: {e}", pytrace=False)
