"""A webhook receiver on loopback: records every notification; answers as the test says."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    headers: dict[str, str]
    body: dict[str, Any]
    status: int  # what we answered
    raw: bytes = b""
    received_at: float = 0.0  # time.time() when the request arrived

    @property
    def event_id(self) -> str:
        return self.headers["x-a2a-event-id"]

    @property
    def seq(self) -> int:
        return int(self.event_id.rsplit(":", 1)[1])


class Receiver:
    def __init__(self) -> None:
        self.received: list[Received] = []
        self.statuses: list[int] = []  # answers to give, in order; then `otherwise`
        self.otherwise = 200
        self.delay_s = 0.0
        self.location: str | None = None  # sent as Location (to see a redirect not followed)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real receiver would
            disable_nagle_algorithm = True  # else the body waits on a delayed ACK

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                arrived = time.time()
                body = json.loads(raw or b"{}")
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                with receiver.lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else receiver.otherwise
                    receiver.received.append(
                        Received(
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            status,
                            raw,
                            arrived,
                        )
                    )
                self.send_response(status)
                self.send_header("content-length", "2")
                if receiver.location:
                    self.send_header("location", receiver.location)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def accepted(self) -> list[Received]:
        with self.lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def wait_for(self, predicate: Any, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise TimeoutError(f"receiver: condition not met; got {len(self.received)} requests")


@contextmanager
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    r.thread.start()
    try:
        yield r
    finally:
        r.server.shutdown()
        r.server.server_close()
