"""Webhook receivers for the push benchmark, in a process of their own (so the receivers'
work is not charged to the benchmark's clock or GIL): `count` uvicorn servers on loopback,
each recording the event id and arrival time of every notification.

Control, on any receiver: `GET /records` (JSON: [[event_id, received_at, status], ...]),
`POST /mode?status=503&delay_s=0` (what to answer from now on), `POST /clear`.
Prints one JSON line with the receivers' URLs once they listen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import time
from typing import Any
from urllib.parse import parse_qs

import uvicorn


class Hook:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.status = 200
        self.records: list[tuple[str, float, int]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        arrived = time.time()
        while True:
            message = await receive()
            if not message.get("more_body"):
                break
        path, method = scope["path"], scope["method"]
        body = b"ok"
        status = 200
        if path == "/records":
            body = json.dumps(self.records).encode()
        elif path == "/mode":
            query = parse_qs(scope["query_string"].decode())
            self.status = int(query.get("status", ["200"])[0])
            self.delay_s = float(query.get("delay_s", [str(self.delay_s)])[0])
        elif path == "/clear":
            self.records.clear()
        elif method == "POST":
            headers = dict(scope["headers"])
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            status = self.status
            self.records.append((headers.get(b"x-a2a-event-id", b"").decode(), arrived, status))
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--slow-s", type=float, default=5.0)
    args = parser.parse_args()
    servers: list[uvicorn.Server] = []
    serving, urls = [], []
    for n in range(args.count):
        # IPPROTO_TCP, or asyncio leaves Nagle on and every answer waits for a delayed ACK
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        urls.append(f"http://127.0.0.1:{sock.getsockname()[1]}")
        config = uvicorn.Config(
            Hook(args.slow_s if n == 0 else 0.0),
            log_level="warning",
            http="httptools",
            lifespan="off",
            access_log=False,
        )
        server = uvicorn.Server(config)
        servers.append(server)
        serving.append(asyncio.create_task(server.serve(sockets=[sock])))
    while not all(s.started for s in servers):
        await asyncio.sleep(0.01)
    print(json.dumps(urls), flush=True)
    await asyncio.gather(*serving)


if __name__ == "__main__":
    asyncio.run(main())
