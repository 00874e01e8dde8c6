"""The engine's (DBOS's) connections: a transaction a frozen worker leaves open ends after the
heartbeat timeout, and its locks with it, so the takeover of that worker's runs never waits
on them."""

from __future__ import annotations

import time

import psycopg
import pytest

from persistence.engine_connections import engine_connection_factory


def test_a_transaction_left_idle_past_the_timeout_ends_and_frees_its_lock(
    database_url: str,
) -> None:
    connect = engine_connection_factory(database_url, idle_in_transaction_s=0.5)
    frozen = connect()
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("CREATE TABLE held (id int PRIMARY KEY, n int)")
        other.execute("INSERT INTO held VALUES (1, 0)")
        # As DBOS records a step: the workflow's row locked, then the worker stops.
        frozen.execute("SELECT n FROM held WHERE id = 1 FOR NO KEY UPDATE")
        started = time.monotonic()
        other.execute("SET lock_timeout = '10s'")
        other.execute("UPDATE held SET n = 1 WHERE id = 1")  # what a takeover does
        waited = time.monotonic() - started
        assert 0.3 < waited < 9, waited  # released by the timeout, not by the lock_timeout
    # The worker that comes back finds its session ended: SQLSTATE 25P03, which DBOS takes
    # as retriable (it reruns the transaction on a new connection).
    with pytest.raises(psycopg.errors.IdleInTransactionSessionTimeout):
        frozen.execute("SELECT 1")
    frozen.close()


def test_without_a_timeout_the_setting_is_left_as_the_server_has_it(database_url: str) -> None:
    plain = engine_connection_factory(database_url)()
    with plain:
        (shown,) = plain.execute("SHOW idle_in_transaction_session_timeout").fetchone() or ("",)
    assert shown == "0"
