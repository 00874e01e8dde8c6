"""Every command in a box of its own: bubblewrap, with the task's workspace as the only
writable path.

The box has its own PID namespace and `/proc` (the server's processes and their environment,
`/proc/$PPID/environ` included, do not exist in it), its own IPC and host name, a private
`/tmp`, `/run` (the database's socket lives there) and `/var/tmp`, the rest of the system
read-only, and the server's home and the server user's home directory hidden (other
workspaces, the admin key, an embedded database's files, `~/.ssh`, `~/.pgpass`). The network
is off unless the operator turns it on; directories the operator shares
(A2A_AGENT_SANDBOX_SHARED, a package cache say) are writable in every box. Killing the box's
first process ends everything in it, children that called `setsid` included (the
namespace's init dies, the kernel kills the rest), and `--die-with-parent` ends it with the
worker.

`A2A_AGENT_SANDBOX=off` runs commands without it: then they run as the server's user with
its view of the machine (see the README for what that loses).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from a2a_agent.errors import ConfigError

BWRAP = "bwrap"


@dataclass(frozen=True)
class Sandbox:
    enabled: bool = True
    network: bool = False
    hidden: tuple[Path, ...] = field(default_factory=tuple)  # the server's home, ~
    shared: tuple[Path, ...] = field(default_factory=tuple)  # writable in every box
    bwrap: str = BWRAP

    def wrap(
        self,
        argv: Sequence[str],
        workspace: Path,
        *,
        network: bool | None = None,
        writable: Sequence[Path] = (),
        readable: Sequence[Path] = (),
    ) -> list[str]:
        """`argv` as it runs in the box for `workspace` (unchanged when the box is off).
        `network` overrides the setting (the harness's own fetch and push need it); the
        `writable` paths are bound read-write too (a local repository a push goes to), the
        `readable` ones read-only (one a fetch reads, wherever it is: /tmp is private)."""
        if not self.enabled:
            return list(argv)
        ws = str(workspace)
        args = [
            self.bwrap,
            "--die-with-parent",
            "--new-session",  # no terminal to push keystrokes into
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--ro-bind", "/", "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--tmpfs", "/tmp",
            "--tmpfs", "/run",
            "--tmpfs", "/var/tmp",
        ]  # fmt: skip
        for path in self.shared:  # before the hidden ones: a shared parent hides no secret
            if path.is_dir():
                args += ["--bind", str(path), str(path)]
        for path in self.hidden:
            if path.is_dir():
                args += ["--tmpfs", str(path)]
        if not (self.network if network is None else network):
            args.append("--unshare-net")
        for path in readable:
            args += ["--ro-bind", str(path), str(path)]
        for path in writable:
            args += ["--bind", str(path), str(path)]
        args += ["--bind", ws, ws, "--chdir", ws, "--", *argv]
        return args

    def check(self) -> None:
        """Fail at start, saying what to do, if commands could not run in the box."""
        if not self.enabled:
            return
        found = shutil.which(self.bwrap)
        if found is None:
            raise ConfigError(
                "bubblewrap (bwrap) is not installed, so commands cannot run isolated: "
                "install it (Debian: apt-get install bubblewrap), or set A2A_AGENT_SANDBOX=off "
                "to run commands without isolation (they can then read the server's secrets "
                "and other tasks' files; see the README)"
            )
        probe = Path("/")
        try:
            done = subprocess.run(
                self.wrap(["/bin/true"], probe),
                capture_output=True,
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"bubblewrap could not start a sandbox: {exc}") from exc
        if done.returncode != 0:
            raise ConfigError(
                "bubblewrap is installed but cannot make a sandbox here ("
                + done.stderr.decode(errors="replace").strip()[:300]
                + "); it needs user namespaces or root. Fix that, or set A2A_AGENT_SANDBOX=off "
                "to run commands without isolation"
            )
