"""Push delivery: the event table as the outbox against a DBOS queue fed per event.

Both deliver the same events, committed at `--rate` per second: each is a row inserted
(with its NOTIFY) in one transaction, as a task's transition writes it.

- outbox: a listener (LISTEN) wakes on the NOTIFY and reads the row by its cursor; nothing
  more is written per event than the event itself.
- queue: after the event's transaction, a DBOS workflow is enqueued for it (DBOS's enqueue
  is its own transaction on its system tables, so it cannot share the transition's commit);
  the queue's workers start it after their next poll (`--poll-s`, ours is 0.5 s).

Prints, for each, the latency from the event's commit to the moment delivery could begin
(p50, p99) and what each event costs the writer beyond its own transaction.

    .venv/bin/python bench/outbox_vs_queue.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import threading
import time
import uuid
from typing import Any

import psycopg
from dbos import DBOS, Queue
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SCHEMA = """
CREATE TABLE bench_events (
    task_id text NOT NULL, seq integer NOT NULL, body jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(), PRIMARY KEY (task_id, seq));
"""
INSERT = "INSERT INTO bench_events (task_id, seq, body) VALUES (%(t)s, %(s)s, %(b)s)"
NOTIFY = "SELECT pg_notify('bench_events', %(t)s)"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def figures(latencies_ms: list[float], extra_ms: list[float]) -> dict[str, float]:
    return {
        "events": len(latencies_ms),
        "p50_ms": round(statistics.median(latencies_ms), 2),
        "p99_ms": round(pct(latencies_ms, 99), 2),
        "extra_writer_ms_per_event": round(statistics.mean(extra_ms), 3) if extra_ms else 0.0,
    }


async def outbox(url: str, events: int, rate: float) -> dict[str, float]:
    committed: dict[int, float] = {}
    latencies: list[float] = []
    done = asyncio.Event()

    async def listen() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute("LISTEN bench_events")
            cursor = 0
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as reader:
                listening.set()
                async for _ in conn.notifies():
                    cur = await reader.execute(
                        "SELECT seq FROM bench_events WHERE task_id = 't' AND seq > %s "
                        "ORDER BY seq",
                        (cursor,),
                    )
                    now = time.perf_counter()
                    for (seq,) in await cur.fetchall():
                        latencies.append((now - committed[seq]) * 1000)
                        cursor = seq
                    if cursor >= events:
                        done.set()
                        return

    listening = asyncio.Event()
    task = asyncio.create_task(listen())
    await listening.wait()
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for seq in range(1, events + 1):
            async with conn.transaction():
                await conn.execute(INSERT, {"t": "t", "s": seq, "b": json.dumps({"n": seq})})
                await conn.execute(NOTIFY, {"t": "t"})
            committed[seq] = time.perf_counter()
            await asyncio.sleep(1 / rate)
    await asyncio.wait_for(done.wait(), 30)
    await task
    return figures(latencies, [])


def queue(url: str, events: int, rate: float, poll_s: float) -> dict[str, float]:
    started: dict[int, float] = {}
    lock = threading.Lock()
    parts = conninfo_to_dict(url)
    DBOS(
        config={
            "name": "bench-outbox",
            "system_database_url": (
                f"postgresql://{parts.get('user', 'postgres')}@{parts.get('host', '127.0.0.1')}:"
                f"{parts.get('port', 5432)}/{parts['dbname']}"
            ),
            "log_level": "WARNING",
        }
    )

    @DBOS.workflow()
    def deliver(seq: int) -> None:
        with lock:
            started[seq] = time.perf_counter()

    DBOS.launch()
    pushes: Queue = DBOS.register_queue(
        "bench-push", polling_interval_sec=poll_s, worker_concurrency=32
    )
    committed: dict[int, float] = {}
    extra: list[float] = []
    try:
        with psycopg.connect(url) as conn:
            for seq in range(1, events + 1):
                with conn.transaction():
                    conn.execute(INSERT, {"t": "q", "s": seq, "b": json.dumps({"n": seq})})
                    conn.execute(NOTIFY, {"t": "q"})
                committed[seq] = time.perf_counter()
                pushes.enqueue(deliver, seq)
                extra.append((time.perf_counter() - committed[seq]) * 1000)
                time.sleep(1 / rate)
        deadline = time.monotonic() + 60
        while len(started) < events and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        DBOS.destroy()
    latencies = [(started[s] - committed[s]) * 1000 for s in started]
    return figures(latencies, extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default=os.environ.get("BENCH_PG", DEFAULT_SERVER))
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--poll-s", type=float, default=0.5)
    args = parser.parse_args()
    name = f"a2a_bench_outbox_{uuid.uuid4().hex[:8]}"
    url = make_conninfo(args.server, dbname=name)
    with psycopg.connect(args.server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    out: dict[str, Any] = {}
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(SCHEMA)
        out["outbox"] = asyncio.run(outbox(url, args.events, args.rate))
        out["dbos_queue"] = queue(url, args.events, args.rate, args.poll_s)
    finally:
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    for kind, f in out.items():
        print(
            f"{kind}: {f['events']} events at {args.rate:g}/s; commit to delivery start "
            f"p50 {f['p50_ms']} ms, p99 {f['p99_ms']} ms; the writer pays "
            f"{f['extra_writer_ms_per_event']} ms per event beyond its own transaction"
        )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
