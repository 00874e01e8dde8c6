"""Second instances of this service as peer A2A agents, for the tests of delegation."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from tests.support.processes import AgentProcess

StartPeer = Callable[..., AgentProcess]


def peer_starter(
    make_database: Callable[[str | None], str], template_db: str, tmp_path: Path
) -> Iterator[StartPeer]:
    """Peers, each with its own database and keys (authentication on), killed at the end."""
    started: list[AgentProcess] = []

    def start(**env: str) -> AgentProcess:
        process = AgentProcess(
            role="serve",
            database_url=make_database(template_db),
            home=tmp_path / f"peer-home-{len(started)}",
            executor_id=f"peer-{len(started)}",
            env={"A2A_AGENT_INSECURE_OPEN": "0", **env},
        )
        started.append(process)
        return process.start()

    yield start
    for process in started:
        process.kill()


def webhook_peer(start_peer: StartPeer) -> AgentProcess:
    """A peer that takes our webhook (on loopback, which its guard refuses by default)."""
    return start_peer(A2A_AGENT_PUSH_ALLOW_HOSTS="127.0.0.1")
