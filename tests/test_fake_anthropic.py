"""The fake Anthropic server speaks the wire format the real `anthropic` SDK expects."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import TextBlock, ToolUseBlock

from tests.support.fake_anthropic import (
    JSON,
    FakeAnthropic,
    api_key_of,
    error_reply,
    read_log,
    text_reply,
    tool_reply,
    tools_reply,
    wait_for_port_file,
)

REPO = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4-6"
TINY = 0.001  # seconds; a retry-after the SDK honours instead of its ~0.5 s backoff
HELLO: list[Any] = [{"role": "user", "content": "hello"}]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def client(fake: FakeAnthropic, *, max_retries: int = 2) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="test-key", base_url=fake.base_url, max_retries=max_retries)


def test_text_reply_round_trips_with_usage_and_cache_fields(fake: FakeAnthropic) -> None:
    fake.add(
        text_reply("Hi there", input_tokens=12, output_tokens=3, cache_read=100, cache_write=7)
    )
    with client(fake) as c:
        msg = c.messages.create(
            model=MODEL,
            max_tokens=256,
            messages=HELLO,
            extra_headers={"anthropic-beta": "prompt-caching-2024-07-31"},
        )
    assert msg.type == "message" and msg.role == "assistant" and msg.model == MODEL
    assert msg.id.startswith("msg_01")
    assert len(msg.content) == 1
    block = msg.content[0]
    assert isinstance(block, TextBlock) and block.text == "Hi there"
    assert msg.stop_reason == "end_turn" and msg.stop_sequence is None
    assert msg.usage.input_tokens == 12 and msg.usage.output_tokens == 3
    assert msg.usage.cache_read_input_tokens == 100
    assert msg.usage.cache_creation_input_tokens == 7
    [headers] = fake.request_headers
    assert api_key_of(headers) == "test-key"  # x-api-key, or a Bearer token in newer SDKs
    assert headers["anthropic-version"]  # dated, e.g. "2023-06-01"
    assert headers["anthropic-beta"] == "prompt-caching-2024-07-31"
    assert fake.remaining == 0 and fake.errors == []


def test_default_usage_is_derived_from_sizes(fake: FakeAnthropic) -> None:
    fake.add({"text": "x" * 400})
    with client(fake) as c:
        msg = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    body_size = len(json.dumps(fake.requests[0]))
    assert abs(msg.usage.input_tokens - body_size // 4) <= 3
    assert 100 <= msg.usage.output_tokens <= 120
    assert msg.usage.cache_read_input_tokens == 0
    assert msg.usage.cache_creation_input_tokens == 0


def test_tool_use_reply_is_a_tool_use_block(fake: FakeAnthropic) -> None:
    fake.add(
        tool_reply("search", {"query": "fake servers", "limit": 3}),
        tools_reply(("read", {"path": "a"}), ("read", {"path": "b"}), text="Reading both."),
    )
    with client(fake) as c:
        first = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        second = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert first.stop_reason == "tool_use"
    [call] = first.content
    assert isinstance(call, ToolUseBlock)
    assert call.name == "search" and call.input == {"query": "fake servers", "limit": 3}
    assert call.id.startswith("toolu_01")
    assert second.stop_reason == "tool_use"
    text, *calls = second.content
    assert isinstance(text, TextBlock) and text.text == "Reading both."
    assert [(b.name, b.input) for b in calls if isinstance(b, ToolUseBlock)] == [
        ("read", {"path": "a"}),
        ("read", {"path": "b"}),
    ]
    assert len({b.id for b in calls if isinstance(b, ToolUseBlock)}) == 2


def test_callable_entry_answers_the_latest_tool_result(fake: FakeAnthropic) -> None:
    def answer(request: JSON) -> JSON:
        last = request["messages"][-1]["content"][-1]
        assert last["type"] == "tool_result"
        return text_reply(f"the tool said {last['content']}")

    fake.add(tool_reply("add", {"a": 2, "b": 3}), answer)
    messages: list[Any] = list(HELLO)
    with client(fake) as c:
        first = c.messages.create(model=MODEL, max_tokens=64, messages=messages)
        [call] = [b for b in first.content if isinstance(b, ToolUseBlock)]
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "5"}],
            },
        ]
        final = c.messages.create(model=MODEL, max_tokens=64, messages=messages)
    assert isinstance(final.content[0], TextBlock)
    assert final.content[0].text == "the tool said 5"
    assert fake.requests[1]["messages"][1]["content"][0]["id"] == call.id


def test_429_then_success_is_retried_by_the_sdk(fake: FakeAnthropic) -> None:
    fake.add(error_reply(429, retry_after=TINY), text_reply("ok"))
    with client(fake) as c:
        msg = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert isinstance(msg.content[0], TextBlock) and msg.content[0].text == "ok"
    assert fake.request_count == 2
    assert [r.status for r in fake.records] == [429, 200]
    assert fake.request_headers[1]["x-stainless-retry-count"] == "1"


def test_529_twice_then_success_within_max_retries(fake: FakeAnthropic) -> None:
    overloaded = error_reply(529, retry_after=TINY)
    fake.add(overloaded, overloaded, text_reply("finally"))
    with client(fake, max_retries=2) as c:
        msg = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert isinstance(msg.content[0], TextBlock) and msg.content[0].text == "finally"
    assert fake.request_count == 3


def test_529_beyond_max_retries_raises_overloaded(fake: FakeAnthropic) -> None:
    fake.add(*[error_reply(529, retry_after=TINY)] * 3)
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.InternalServerError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert fake.request_count == 3


def test_error_body_and_headers_match_the_api(fake: FakeAnthropic) -> None:
    fake.add(error_reply(429, message="slow down", retry_after=0.01))
    with client(fake, max_retries=0) as c, pytest.raises(anthropic.RateLimitError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    err = info.value
    assert err.type == "rate_limit_error" and err.api_message == "slow down"
    assert err.response.headers["content-type"] == "application/json"
    assert err.response.headers["retry-after-ms"] == "10"
    assert err.response.headers["retry-after"] == "1"
    assert err.request_id is not None and err.request_id.startswith("req_")
    assert err.body == {
        "type": "error",
        "error": {"type": "rate_limit_error", "message": "slow down"},
        "request_id": err.request_id,
    }


def test_400_raises_bad_request_without_retrying(fake: FakeAnthropic) -> None:
    fake.add(error_reply(400, message="messages: field required"))
    with client(fake) as c, pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert info.value.type == "invalid_request_error"
    assert info.value.api_message == "messages: field required"
    assert fake.request_count == 1


def test_exhausted_script_is_a_clear_server_error(fake: FakeAnthropic) -> None:
    with client(fake, max_retries=0) as c, pytest.raises(anthropic.InternalServerError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert info.value.status_code == 500
    assert "fake anthropic: script exhausted" in str(info.value)
    # x-should-retry: false keeps a retrying client from asking again.
    with client(fake, max_retries=2) as c, pytest.raises(anthropic.InternalServerError):
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert fake.request_count == 2


def test_a_raising_responder_is_a_500_that_is_not_retried(fake: FakeAnthropic) -> None:
    def broken(request: JSON) -> JSON:
        raise KeyError("no such field")

    fake.add(broken)
    with client(fake) as c, pytest.raises(anthropic.InternalServerError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    assert "bad script entry" in str(info.value) and "no such field" in str(info.value)
    assert fake.request_count == 1 and len(fake.errors) == 1


def test_delay_lets_a_client_time_out_after_the_request_is_recorded(fake: FakeAnthropic) -> None:
    fake.add(text_reply("too late", delay=0.5))
    with client(fake, max_retries=0) as c, pytest.raises(anthropic.APITimeoutError):
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO, timeout=0.1)
    assert fake.request_count == 1 and fake.remaining == 0


def test_streaming_is_refused_without_consuming_the_script(fake: FakeAnthropic) -> None:
    fake.add(text_reply("unused"))
    with client(fake) as c, pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model=MODEL, max_tokens=64, messages=HELLO, stream=True)
    assert "streaming is not supported by the fake" in str(info.value)
    assert fake.remaining == 1


def test_count_tokens(fake: FakeAnthropic) -> None:
    with client(fake) as c:
        counted = c.messages.count_tokens(model=MODEL, messages=HELLO)
    assert counted.input_tokens > 0
    assert fake.request_count == 0 and [r.path for r in fake.records] == [
        "/v1/messages/count_tokens"
    ]


def test_recorded_body_has_what_the_client_sent(fake: FakeAnthropic) -> None:
    fake.add(text_reply("done"))
    tools: list[Any] = [
        {
            "name": "search",
            "description": "Search things.",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        }
    ]
    system: list[Any] = [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    with client(fake) as c:
        c.messages.create(model=MODEL, max_tokens=128, system=system, tools=tools, messages=HELLO)
    [body] = fake.requests
    assert body["model"] == MODEL and body["max_tokens"] == 128
    assert body["system"] == system and body["tools"] == tools and body["messages"] == HELLO


async def test_async_client(fake: FakeAnthropic) -> None:
    fake.add(error_reply(529, retry_after=TINY), tool_reply("lookup", {"id": 7}))
    async with anthropic.AsyncAnthropic(
        api_key="test-key", base_url=fake.base_url, max_retries=2
    ) as c:
        msg = await c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
    [call] = msg.content
    assert isinstance(call, ToolUseBlock) and call.input == {"id": 7}
    assert fake.request_count == 2


def test_subprocess_mode(tmp_path: Path) -> None:
    port_file, script_file, log_file = (tmp_path / n for n in ("port", "script.json", "log"))
    script_file.write_text(json.dumps([text_reply("from a process", input_tokens=5)]))
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "tests.support.fake_anthropic"),
            *("--port-file", str(port_file)),
            *("--script-file", str(script_file)),
            *("--log-file", str(log_file)),
        ],
        cwd=REPO,
    )
    try:
        port = wait_for_port_file(port_file)
        base_url = f"http://127.0.0.1:{port}"
        with anthropic.Anthropic(api_key="test-key", base_url=base_url, max_retries=0) as c:
            msg = c.messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        assert isinstance(msg.content[0], TextBlock)
        assert msg.content[0].text == "from a process" and msg.usage.input_tokens == 5
        [line] = read_log(log_file)
        assert line["path"] == "/v1/messages" and line["status"] == 200
        assert line["body"]["messages"] == HELLO and api_key_of(line["headers"]) == "test-key"
    finally:
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=10)
    assert returncode == 0
