"""Fixtures of the client tests: one keyed server per test module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from tests.clients.echo_model import echo_model
from tests.clients.harness import Served, keyed_server


@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest,
    make_database: Callable[[str | None], str],
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    """A real `a2a-agent serve` with authentication on, shared by the tests of one module
    (they only submit tasks of their own; none restarts or breaks it). A module whose client
    sends only text (`NEEDS_MODEL = True`) gets the service's model faked by `echo_model`."""
    name = request.module.__name__.rsplit(".", 1)[-1]
    home = tmp_path_factory.mktemp(f"{name}-home")
    with ExitStack() as stack:
        env = (
            stack.enter_context(echo_model())
            if getattr(request.module, "NEEDS_MODEL", False)
            else {}
        )
        yield stack.enter_context(keyed_server(make_database, template_db, home, name, **env))
