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

import os
import re
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


# What a shell (bash, dash) or an exec wrapper (env, timeout, nice, xargs) prints when it cannot
# start a program: "bash: line 1: prog: command not found", "sh: 1: prog: not found",
# "bash: line 1: ./x: Permission denied", "timeout: failed to run command 'prog': No such
# file or directory".
_SHELL_LINE = re.compile(r"^\S*sh: (?:line \d+: |\d+: )?(?P<rest>.+)$")
_WRAPPER_LINE = re.compile(
    r"^\S+: (?:failed to run command |cannot run command )?"
    r"['\u2018\"](?P<program>[^'\u2019\"]+)['\u2019\"]: "
    r"(?P<said>No such file or directory|Permission denied)$"
)
_BAD_INTERPRETER = re.compile(r"^(?P<program>.+?): (?P<interpreter>[^:]+): bad interpreter: .+$")
_NOT_FOUND = (
    "command not found",
    "not found",
    "No such file or directory",
    "cannot execute: required file not found",
)
_NOT_EXECUTABLE = (
    "Permission denied",
    "Is a directory",
    "cannot execute binary file: Exec format error",
    "cannot execute binary file",
    "Exec format error",
)


def _shell_said(exit_code: int, output: str) -> tuple[str, str, str | None] | None:
    """(program, what the shell said, the #! interpreter it named) from the last line of
    `output` in which a shell or an exec wrapper says it could not start a program, of the kind
    `exit_code` means (127: not found, 126: not executable)."""
    said_kinds = _NOT_FOUND if exit_code == 127 else _NOT_EXECUTABLE
    for raw in reversed(output.splitlines()):
        line = raw.strip()
        wrapped = _WRAPPER_LINE.match(line)
        if wrapped and wrapped["said"] in said_kinds:
            return wrapped["program"], wrapped["said"], None
        shell = _SHELL_LINE.match(line)
        if shell is None:
            continue
        rest = shell["rest"]
        bad = _BAD_INTERPRETER.match(rest)
        if bad and exit_code == 127:
            return bad["program"], "bad interpreter", bad["interpreter"]
        for said in said_kinds:
            if rest.endswith(f": {said}"):
                program = rest[: -len(said) - 2]
                program = program.removeprefix("exec: ")
                if program and ": " not in program:  # not a builtin's complaint (cd: x: ...)
                    return program, said, None
    return None


def _under(path: str, dirs: Sequence[Path]) -> Path | None:
    if not path.startswith("/"):
        return None
    here = Path(os.path.normpath(path))
    return next((d for d in dirs if here == d or here.is_relative_to(d)), None)


def _rules(box: Sandbox) -> str:
    if not box.enabled:
        return (
            "Commands run without a sandbox (A2A_AGENT_SANDBOX=off): as the server's user, with "
            "the PATH the server passes them."
        )
    hidden = ", ".join(str(p) for p in box.hidden) or "nothing else"
    shared = (
        f"binds {', '.join(str(p) for p in box.shared)} read-write (A2A_AGENT_SANDBOX_SHARED)"
        if box.shared
        else "shares no other directory (A2A_AGENT_SANDBOX_SHARED is empty)"
    )
    network = (
        "the network on (A2A_AGENT_COMMAND_NETWORK=on)"
        if box.network
        else "no network (A2A_AGENT_COMMAND_NETWORK=on gives it one)"
    )
    return (
        "Commands run in a sandbox that shows the system read-only, the task's workspace "
        f"read-write and a private /tmp, hides {hidden} (the server's home and its user's home, "
        f"other tasks' workspaces with them), {shared}, and has {network}."
    )


def cannot_run(
    box: Sandbox, exit_code: int, output: str, *, search_path: str | None = None
) -> str | None:
    """Why a command's program could not run, in words for the record, the report and the
    model, or None if the command ran.

    Only when the shell (or an exec wrapper such as `env` or `timeout`) said so: a command
    exits 127 or 126 when its program was not found or could not be executed, but a program
    may exit 127 or 126 itself (`sh -c 'exit 127'`), and then nothing is said. `search_path`
    is the command's PATH, to name its entries the box hides."""
    if exit_code not in (126, 127):
        return None
    found = _shell_said(exit_code, output)
    if found is None:
        return None
    program, said, interpreter = found
    where = " in the sandbox" if box.enabled else ""
    if interpreter is not None or said == "cannot execute: required file not found":
        named = f"`{interpreter}`" if interpreter else "the interpreter its first line (#!) names"
        what = f"`{program}` could not start: {named} was not found{where}"
        missing = interpreter or ""
    elif exit_code == 127:
        what = f"`{program}` was not found{where} (the shell said: {said})"
        missing = program
    else:
        what = f"`{program}` was found{where} but could not be executed (the shell said: {said})"
        missing = ""
    hidden = _under(missing, box.hidden) if box.enabled else None
    if hidden is not None:
        what += f"; `{missing}` is under {hidden}, which the sandbox hides"
    elif box.enabled and missing and "/" not in missing and search_path:
        unseen = [p for p in search_path.split(":") if p and _under(p, box.hidden)]
        if unseen:
            what += f"; the sandbox hides these PATH entries: {', '.join(unseen)}"
    if exit_code == 126:
        fix = (
            "To fix: make it executable (chmod +x, with the work) or run it through its "
            f"interpreter (`bash {program}`, `python3 {program}`); a directory, or a binary for "
            "another machine, cannot be run."
        )
    elif box.enabled:
        fix = (
            "To fix: install the program system-wide (/usr, /usr/local: the system's package "
            "manager, say), put it in the workspace (a virtualenv or script made by the work) "
            "and call it by that path, or have the operator share its directory with "
            "A2A_AGENT_SANDBOX_SHARED (not one under a hidden directory: that stays hidden)."
        )
    else:
        fix = "To fix: install the program where that PATH finds it, or put it in the workspace."
    return f"{what}. {_rules(box)} {fix}"
