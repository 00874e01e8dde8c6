"""A scripted fake of the Anthropic Messages API, on loopback, for tests.

In-process::

    with FakeAnthropic([text_reply("hi")]) as fake:
        client = anthropic.Anthropic(api_key="k", base_url=fake.base_url)

As its own process (survives the service under test being killed)::

    python -m tests.support.fake_anthropic --port-file P --script-file S.json [--log-file L]

Script entries (dicts, or in-process only a callable ``fn(request_json) -> entry``):

- ``{"text": str, "stop_reason"?: str, "usage"?: {...}}``
- ``{"tool_use": [{"name": str, "input": {...}, "id"?: str}], "text"?: str, "usage"?: {...}}``
- ``{"content": [raw content blocks], "stop_reason"?: str, "usage"?: {...}}``
- ``{"status": int, "error_type"?: str, "message"?: str, "retry_after"?: float,
  "should_retry"?: bool}``

Any entry may carry ``"delay": seconds`` (slept after the request is recorded).
Missing usage numbers are derived from the sizes of the request and the reply.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import signal
import string
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple, TypedDict, Unpack, cast
from urllib.parse import urlsplit

JSON = dict[str, Any]
Responder = Callable[[JSON], JSON]
Entry = JSON | Responder

_ALPHABET = string.ascii_letters + string.digits
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def new_id(prefix: str) -> str:
    """An id shaped like the API's, e.g. ``msg_01AbC...`` or ``toolu_01XyZ...``."""
    return prefix + "01" + "".join(secrets.choice(_ALPHABET) for _ in range(22))


class ReplyOptions(TypedDict, total=False):
    input_tokens: int  # default: request size // 4
    output_tokens: int  # default: reply size // 4
    cache_read: int  # usage.cache_read_input_tokens, default 0
    cache_write: int  # usage.cache_creation_input_tokens, default 0
    delay: float  # seconds to wait before answering


def _options(opts: ReplyOptions) -> JSON:
    usage: JSON = {
        "cache_read_input_tokens": opts.get("cache_read", 0),
        "cache_creation_input_tokens": opts.get("cache_write", 0),
    }
    for key in ("input_tokens", "output_tokens"):
        if key in opts:
            usage[key] = opts[key]
    return {"usage": usage, "delay": opts.get("delay", 0.0)}


def text_reply(text: str, *, stop_reason: str = "end_turn", **opts: Unpack[ReplyOptions]) -> JSON:
    """A final assistant message holding one text block."""
    return {"text": text, "stop_reason": stop_reason, **_options(opts)}


def tools_reply(
    *calls: tuple[str, Mapping[str, Any]], text: str | None = None, **opts: Unpack[ReplyOptions]
) -> JSON:
    """An assistant message calling each ``(name, input)`` tool, after an optional text block."""
    uses = [{"name": name, "input": dict(args)} for name, args in calls]
    return {"tool_use": uses, "text": text, **_options(opts)}


def tool_reply(
    name: str, input: Mapping[str, Any], *, text: str | None = None, **opts: Unpack[ReplyOptions]
) -> JSON:
    """An assistant message calling one tool (``stop_reason: "tool_use"``)."""
    return tools_reply((name, input), text=text, **opts)


def error_reply(
    status: int,
    error_type: str | None = None,
    message: str | None = None,
    *,
    retry_after: float | None = None,
    should_retry: bool | None = None,
    delay: float = 0.0,
) -> JSON:
    """An API error. ``retry_after`` (seconds) sets ``retry-after-ms`` and ``retry-after``;
    the SDK honours it when > 0 (0 means its own backoff, about 0.5 s, applies)."""
    entry = {"status": status, "error_type": error_type, "message": message, "delay": delay}
    entry |= {"retry_after": retry_after, "should_retry": should_retry}
    return {key: value for key, value in entry.items() if value is not None}


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: JSON | None  # None when the body was not a JSON object
    status: int  # the status the fake answered with


class _Reply(NamedTuple):
    status: int
    payload: JSON
    headers: dict[str, str]
    delay: float = 0.0


def _error(
    status: int, error_type: str, message: str, headers: Mapping[str, str] | None = None
) -> _Reply:
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return _Reply(status, body, dict(headers or {}))


class FakeAnthropic:
    """A threaded HTTP server answering ``POST /v1/messages`` from a queue of scripted entries."""

    def __init__(
        self,
        script: Iterable[Entry] = (),
        *,
        log_file: str | os.PathLike[str] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self._lock = threading.Lock()
        self._script: deque[Entry] = deque(script)
        self._records: list[RecordedRequest] = []
        self._errors: list[str] = []
        self._log_file = Path(log_file) if log_file is not None else None
        self._in_flight = 0
        self.max_in_flight = 0  # the most requests answered at once (benchmarks read it)
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread: threading.Thread | None = None

    # lifecycle
    def start(self) -> FakeAnthropic:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # scripting and inspection
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._server.server_address[0]!s}:{self.port}"

    def add(self, *entries: Entry) -> None:
        """Append entries to the script."""
        with self._lock:
            self._script.extend(entries)

    @property
    def remaining(self) -> int:
        """Scripted entries not consumed yet."""
        with self._lock:
            return len(self._script)

    @property
    def records(self) -> list[RecordedRequest]:
        """Every request received, on any path, in arrival order."""
        with self._lock:
            return list(self._records)

    def _messages(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self._records if r.path == "/v1/messages"]

    @property
    def requests(self) -> list[JSON]:
        """Parsed bodies of the ``POST /v1/messages`` requests."""
        return [r.body if r.body is not None else {} for r in self._messages()]

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers (lower-cased names) of the ``POST /v1/messages`` requests."""
        return [r.headers for r in self._messages()]

    @property
    def request_count(self) -> int:
        return len(self._messages())

    @property
    def errors(self) -> list[str]:
        """Broken script entries or responders that raised (answered with 500)."""
        with self._lock:
            return list(self._errors)

    # answering
    @property
    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self._records.append(record)
            if self._log_file is not None:
                line = {"time": time.time(), **asdict(record)}
                with self._log_file.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(line) + "\n")

    def _respond(self, path: str, body: JSON | None, size: int) -> _Reply:
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return _error(404, "not_found_error", f"fake anthropic: no route for POST {path}")
        if body is None:
            return _error(400, "invalid_request_error", "fake anthropic: body is not a JSON object")
        if path == "/v1/messages/count_tokens":
            return _Reply(200, {"input_tokens": max(1, size // 4)}, {})
        if body.get("stream"):
            msg = "fake anthropic: streaming is not supported by the fake (send stream=false)"
            return _error(400, "invalid_request_error", msg)
        with self._lock:
            entry = self._script.popleft() if self._script else None
        if entry is None:
            no_retry = {"x-should-retry": "false"}
            return _error(500, "api_error", "fake anthropic: script exhausted", no_retry)
        try:
            return self._render(entry(body) if callable(entry) else entry, body, size)
        except Exception as exc:  # noqa: BLE001 - reported to the client and kept in .errors
            message = f"fake anthropic: bad script entry {entry!r}: {exc!r}"
            with self._lock:
                self._errors.append(message)
            return _error(500, "api_error", message, {"x-should-retry": "false"})

    @staticmethod
    def _render(entry: JSON, body: JSON, size: int) -> _Reply:
        delay = float(entry.get("delay") or 0.0)
        if "status" in entry:
            status, headers = int(entry["status"]), {}
            if entry.get("retry_after") is not None:
                headers["retry-after-ms"] = str(int(float(entry["retry_after"]) * 1000))
                headers["retry-after"] = str(math.ceil(float(entry["retry_after"])))
            if entry.get("should_retry") is not None:
                headers["x-should-retry"] = "true" if entry["should_retry"] else "false"
            kind = str(entry.get("error_type") or _ERROR_TYPES.get(status, "api_error"))
            text = str(entry.get("message") or f"fake anthropic: scripted {kind}")
            return _error(status, kind, text, headers)._replace(delay=delay)
        calls = list(entry.get("tool_use") or [])
        content: list[JSON] = [dict(block) for block in entry.get("content") or []]
        if entry.get("text") is not None:
            content.append({"type": "text", "text": str(entry["text"])})
        for call in calls:
            tool_id = call.get("id") or new_id("toolu_")
            args = dict(call.get("input") or {})
            content.append({"type": "tool_use", "id": tool_id, "name": call["name"], "input": args})
        if not ({"text", "tool_use", "content"} & entry.keys()):
            raise ValueError("entry needs one of: text, tool_use, content, status")
        usage = dict(entry.get("usage") or {})
        out_tokens = max(1, len(json.dumps(content)) // 4)
        reply = {
            "id": new_id("msg_"),
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": content,
            "stop_reason": entry.get("stop_reason") or ("tool_use" if calls else "end_turn"),
            "stop_sequence": entry.get("stop_sequence"),
            "usage": {
                "input_tokens": int(usage.get("input_tokens", max(1, size // 4))),
                "output_tokens": int(usage.get("output_tokens", out_tokens)),
                "cache_creation_input_tokens": int(usage.get("cache_creation_input_tokens", 0)),
                "cache_read_input_tokens": int(usage.get("cache_read_input_tokens", 0)),
            },
        }
        return _Reply(200, reply, {}, delay)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Hundreds of runs connect at once in the concurrency tests and benchmarks; the default
    # backlog of 5 dropped their connections for a second's retransmit.
    request_queue_size = 1024
    fake: FakeAnthropic

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # client gone: expected in tests
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeAnthropic/1.0"

    def do_POST(self) -> None:
        fake = cast(_Server, self.server).fake
        path = urlsplit(self.path).path.rstrip("/")
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        body = cast(JSON, parsed) if isinstance(parsed, dict) else None
        fake._enter()
        try:
            reply = fake._respond(path, body, len(raw))
            fake._record(RecordedRequest(path, headers, body, reply.status))
            if reply.delay > 0:
                time.sleep(reply.delay)
            self._send(reply)
        finally:
            fake._leave()

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        self._send(_error(404, "not_found_error", f"fake anthropic: no route for GET {path}"))

    def _send(self, reply: _Reply) -> None:
        request_id = new_id("req_")
        payload = dict(reply.payload)
        if payload.get("type") == "error":
            payload["request_id"] = request_id
        data = json.dumps(payload).encode()
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        self.send_header("connection", "close")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output quiet; every request is in .records / the log file


def api_key_of(headers: Mapping[str, str]) -> str | None:
    """The key a request authenticated with: ``x-api-key``, or an ``authorization: Bearer``."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)


def wait_for_port_file(path: str | os.PathLike[str], timeout: float = 10.0) -> int:
    """The port a ``--port-file`` subprocess listens on, once it has written it."""
    deadline = time.monotonic() + timeout
    file = Path(path)
    while time.monotonic() < deadline:
        if file.exists() and file.read_text().strip():
            return int(file.read_text())
        time.sleep(0.02)
    raise TimeoutError(f"fake anthropic wrote no port to {file} within {timeout}s")


def read_log(path: str | os.PathLike[str]) -> list[JSON]:
    """The requests a ``--log-file`` holds, one dict (path, headers, body, status, time) each."""
    file = Path(path)
    if not file.exists():
        return []
    return [json.loads(line) for line in file.read_text().splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port-file", required=True, help="written with the port once listening")
    parser.add_argument("--script-file", help="JSON list of script entries")
    parser.add_argument("--log-file", help="each request is appended here as one JSON line")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    script: list[Entry] = []
    if args.script_file:
        script = json.loads(Path(args.script_file).read_text())
        if not isinstance(script, list):
            parser.error("--script-file must hold a JSON list of entries")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with FakeAnthropic(script, log_file=args.log_file, host=args.host, port=args.port) as fake:
        port_file = Path(args.port_file)
        tmp = port_file.with_name(port_file.name + ".tmp")
        tmp.write_text(f"{fake.port}\n")
        tmp.replace(port_file)  # atomic: readers never see a half-written port
        while not stop.wait(0.1):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())


def model_env(fake: FakeAnthropic, **extra: str) -> dict[str, str]:
    """The environment that points an a2a-agent process at this fake."""
    from tests.support.secrets import secret  # noqa: PLC0415 (this file also runs alone)

    key = secret("sk-ant-fake-" + "5" * 16)
    return {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": fake.base_url, **extra}
