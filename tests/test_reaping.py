"""Children reaped by the loop that started them (a2a_agent/harness/workspace/reaping.py):
exit codes as asyncio gives them, on the server's loop and on another thread's (DBOS runs
steps on a loop of its own), and no thread per child."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_agent.harness.workspace.commands import CommandResult, run_command
from a2a_agent.harness.workspace.reaping import LoopReaper, reap_on_loops
from a2a_agent.harness.workspace.sandbox import Sandbox

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="Python 3.12 waits on pidfds per loop itself"
)


def _default_watcher() -> None:
    """asyncio's default back: made anew (a thread per child) when next asked for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(None)  # type: ignore[arg-type]  # None: the default


@pytest.fixture
def reaper() -> Iterator[None]:
    assert reap_on_loops(), "this machine has pidfds (Linux 5.3 and later)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert isinstance(asyncio.get_child_watcher(), LoopReaper)
    yield
    _default_watcher()


def _waiting_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "waitpid-" in t.name]


async def _exit_codes() -> tuple[list[int], list[str]]:
    """Three children: one exits 0, one 3, one killed while it sleeps; the waiting threads
    seen while the sleeping one ran."""
    ok = await asyncio.create_subprocess_exec("/bin/true")
    three = await asyncio.create_subprocess_exec("/bin/sh", "-c", "exit 3")
    sleeper = await asyncio.create_subprocess_exec(
        "/bin/sleep", "30", stdout=asyncio.subprocess.PIPE
    )
    await asyncio.sleep(0.05)
    seen = _waiting_threads()
    sleeper.send_signal(signal.SIGKILL)
    codes = [await ok.wait(), await three.wait(), await sleeper.wait()]
    return codes, seen


def _on_own_thread() -> tuple[list[int], list[str]]:
    found: list[tuple[list[int], list[str]]] = []
    thread = threading.Thread(target=lambda: found.append(asyncio.run(_exit_codes())))
    thread.start()
    thread.join(30)
    assert found, "the other thread's loop did not finish"
    return found[0]


def test_exit_codes_on_any_loop_and_no_thread_per_child(reaper: None) -> None:
    codes, seen = asyncio.run(_exit_codes())
    assert codes == [0, 3, -signal.SIGKILL]
    assert seen == []
    # A loop of another thread, as DBOS's: asyncio's own pidfd watcher on 3.11 refused it.
    codes, seen = _on_own_thread()
    assert codes == [0, 3, -signal.SIGKILL]
    assert seen == []


def test_the_default_watcher_starts_a_thread_per_child() -> None:
    """The control: what the reaper takes away is there without it."""
    _default_watcher()
    codes, seen = asyncio.run(_exit_codes())
    assert codes == [0, 3, -signal.SIGKILL]
    assert len(seen) == 1


def test_a_command_with_output_and_a_timeout_in_a_box(reaper: None, tmp_path: Path) -> None:
    """The harness's own command runner on the reaper: output, exit code, a timeout's kill."""

    def run(command: str, timeout_s: float) -> CommandResult:
        return asyncio.run(
            run_command(
                command, cwd=tmp_path, env={"PATH": "/usr/bin:/bin"}, timeout_s=timeout_s,
                tail_bytes=4096, sandbox=Sandbox(),
            )
        )  # fmt: skip

    done = run("echo hi; exit 4", 30)
    assert (done.exit_code, done.output_tail.strip(), done.timed_out) == (4, "hi", False)
    slow = run("sleep 30", 0.3)
    assert (slow.exit_code, slow.timed_out) == (124, True)
    assert slow.duration_s < 10
