"""Seeing the service (issue 15, parts 3-5): /metrics in Prometheus's format with the numbers
of runs driven here, one trace per task across a kill -9 (the caller's traceparent its
parent), and JSON-lines logs that say which task, item and step."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import TaskState
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from a2a_agent.observe import tracing
from tests.support.a2a import a2a_client, item, plan_message, send, wait_for
from tests.support.db import rows
from tests.support.fake_anthropic import FakeAnthropic, model_env, text_reply, tool_reply
from tests.support.otlp import otlp_collector
from tests.support.processes import StartAgent
from tests.support.secrets import secret
from tests.test_auth import make_key
from tests.test_pauses import plan_with
from tests.test_prechecks import text_message

COMPLETED, FAILED = TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED
WAITING: set[int] = {TaskState.TASK_STATE_INPUT_REQUIRED}
CALLER_TRACE = "0af7651916cd43dd8448eb211c80319c"
CALLER_SPAN = "b7ad6b7169203331"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text page, by name and labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def test_metrics_match_the_runs_driven(
    start_agent: StartAgent, database_url: str, fake: FakeAnthropic
) -> None:
    plan = {"goal": "g", "items": [{"id": "w", "title": "Write w", "verify": "test -f w"}]}
    fake.add(
        tool_reply("submit_plan", plan),
        tool_reply("write_file", {"path": "w", "content": "w\n"}),
        text_reply("Done."),
    )
    server = start_agent("serve", "obs-m", A2A_AGENT_INSECURE_OPEN="0", **model_env(fake))
    operator = make_key(server, "ops", "read", "submit", "run", "approve", "operator")
    reader = make_key(server, "someone", "read")
    async with a2a_client(server.url, key=operator) as client:
        done = await send(client, plan_message([item("a", "true", "true")]))
        failed = await send(client, plan_message([item("b", "true", "false", max_attempts=1)]))
        waiting = await send(client, plan_with([item("c", "true", "true", irreversible=True)]))
        worked = await send(client, text_message("write w"))
        for task in (done, failed, worked):
            await wait_for(client, task.id, timeout=60)
        await wait_for(client, waiting.id, WAITING, timeout=60)
    url = f"{server.url}/metrics"
    assert httpx.get(url, headers={"Authorization": f"Bearer {reader}"}).status_code == 403
    page = httpx.get(url, headers={"Authorization": f"Bearer {operator}"}, timeout=30)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    found = samples(page.text)
    assert found[("a2a_tasks", (("state", "completed"),))] == 2
    assert found[("a2a_tasks", (("state", "failed"),))] == 1
    assert found[("a2a_tasks", (("state", "input_required"),))] == 1
    assert found[("a2a_approvals_waiting", ())] == 1
    assert found[("a2a_approval_oldest_wait_seconds", ())] >= 0
    # Tokens and calls: what the fake model answered, as the model_calls rows hold them.
    ((calls, input_tokens, output_tokens),) = rows(
        database_url,
        "SELECT count(*), sum(input_tokens), sum(output_tokens) FROM model_calls",
    )
    assert calls == 3 == found[("a2a_model_calls_total", ())]
    assert found[("a2a_model_tokens_total", (("kind", "input"),))] == input_tokens
    assert found[("a2a_model_tokens_total", (("kind", "output"),))] == output_tokens
    # Steps: as many as the ledger holds; the histogram's +Inf bucket counts them all.
    ((verifies,),) = rows(
        database_url, "SELECT count(*) FROM effects WHERE step = 'verify' AND status = 'completed'"
    )
    assert found[("a2a_steps_total", (("step", "verify"),))] == verifies == 3
    bucket = ("a2a_step_duration_seconds_bucket", (("le", "+Inf"), ("step", "verify")))
    assert found[bucket] == verifies
    assert found[("a2a_items", (("status", "done"),))] == 2
    assert found[("a2a_items", (("status", "failed"),))] == 1
    workers = [k for k in found if k[0] == "a2a_worker_heartbeat_age_seconds"]
    assert workers and all(found[k] < 60 for k in workers)


def test_a_step_span_descends_from_the_task_span_and_its_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    caller = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    monkeypatch.setattr(tracing, "_tracer", lambda: tracer)
    task_context = tracing.task_span("t-1", caller)
    with tracing.step_span("a2a.verify_item", task_context, {"a2a.task_id": "t-1"}) as span:
        tracing.outcome(span, {"outcome": "done", "payload": {}})
    task, step = exporter.get_finished_spans()
    assert task.name == "a2a.task" and step.name == "a2a.verify_item"
    assert f"{task.context.trace_id:032x}" == CALLER_TRACE
    assert task.parent is not None and f"{task.parent.span_id:016x}" == CALLER_SPAN
    assert step.parent is not None and step.parent.span_id == task.context.span_id
    assert step.attributes is not None and step.attributes["a2a.outcome"] == "done"


def test_with_tracing_off_a_task_keeps_only_its_callers_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No exporter, no caller's traceparent: nothing to keep, and no span is made for it
    (task_span and step_span skip the no-op tracer); a caller's trace is still carried, so
    its steps join it once tracing is on."""
    monkeypatch.setattr(tracing, "_provider", None)
    made: list[str] = []
    real = tracing._tracer

    def counted() -> Any:
        made.append("tracer")
        return real()

    monkeypatch.setattr(tracing, "_tracer", counted)
    assert tracing.task_span("t-1", None) is None
    with tracing.step_span("a2a.finish", None, {"a2a.task_id": "t-1"}) as span:
        tracing.outcome(span, {"outcome": "ok", "payload": {}})
        assert not span.is_recording()
    assert made == []
    caller = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
    assert tracing.task_span("t-2", caller) == caller


@pytest.mark.slow
async def test_one_trace_per_task_across_a_kill9(
    start_agent: StartAgent, database_url: str, tmp_path: Path
) -> None:
    with otlp_collector() as (endpoint, collected):
        env = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        server = start_agent("serve", "obs-t", **env)
        items = [
            item("one", "echo 1 > one", "test -f one"),
            item("two", "sleep 2; echo 2 > two", "test -f two"),
        ]
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "configuration": {"returnImmediately": True},
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"data": {"plan": {"goal": "traced", "items": items}}}],
                },
            },
        }
        headers = {"A2A-Version": "1.0", "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"}
        answer = httpx.post(server.url + "/", json=body, headers=headers, timeout=30).json()
        task_id = answer["result"]["task"]["id"]
        key = f"{task_id}:two:1:run"
        deadline = time.monotonic() + 60
        while not rows(database_url, "SELECT 1 FROM effects WHERE key = %s", key):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)  # the spans so far are exported (every 50 ms)
        server.kill()
        server = start_agent("serve", "obs-t", **env)
        async with a2a_client(server.url) as client:
            done = await wait_for(client, task_id, timeout=60)
        assert done.status.state == COMPLETED
        deadline = time.monotonic() + 10
        while not any(s["name"] == "a2a.finish" for s in collected.of_task(task_id)):
            assert time.monotonic() < deadline, "the last step's span never arrived"
            time.sleep(0.1)
        spans = collected.of_task(task_id)
    assert {s["trace_id"] for s in spans} == {CALLER_TRACE}
    (task_span,) = [s for s in spans if s["name"] == "a2a.task"]
    assert task_span["parent_span_id"] == CALLER_SPAN
    steps = [s for s in spans if s["name"] != "a2a.task"]
    assert {s["parent_span_id"] for s in steps} == {task_span["span_id"]}
    # Before and after the crash: steps from two processes, in the one trace.
    assert len({s["resource"]["process.pid"] for s in steps}) == 2
    names = {s["name"] for s in steps}
    assert {"a2a.begin_task", "a2a.run_item", "a2a.verify_item", "a2a.finish"} <= names
    (item_two,) = [s for s in steps if s["name"] == "a2a.verify_item"
                   and s["attributes"].get("a2a.item_id") == "two"]  # fmt: skip
    assert item_two["attributes"]["a2a.outcome"] == "done"


async def test_json_lines_say_which_task_item_and_step(start_agent: StartAgent, home: Path) -> None:
    server = start_agent("serve", "obs-l", A2A_AGENT_LOG_FORMAT="json", A2A_AGENT_LOG_LEVEL="debug")
    async with a2a_client(server.url) as client:
        task = await send(client, plan_message([item("x", "echo x > x", "test -f x")]))
        await wait_for(client, task.id, timeout=60)
    lines: list[dict[str, Any]] = [
        json.loads(line) for line in server.log().splitlines() if line.startswith("{")
    ]
    ours = [line for line in lines if line.get("task_id") == task.id]
    steps = {(line.get("item_id"), line.get("step")) for line in ours}
    assert ("x", "verify_item") in steps and (None, "finish") in steps
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)


async def test_a_model_calls_span_carries_its_token_counts(
    start_agent: StartAgent, database_url: str, fake: FakeAnthropic
) -> None:
    plan = {"goal": "g", "items": [{"id": "w", "title": "Write w", "verify": "test -f w"}]}
    fake.add(
        tool_reply("submit_plan", plan, input_tokens=1234, output_tokens=56, cache_read=7),
        tool_reply("write_file", {"path": "w", "content": "w\n"}, input_tokens=800),
        text_reply("Done.", input_tokens=900, output_tokens=9),
    )
    with otlp_collector() as (endpoint, collected):
        env = {
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",
            **model_env(fake),
        }
        server = start_agent("serve", "obs-tok", **env)
        async with a2a_client(server.url) as client:
            done = await wait_for(client, (await send(client, text_message("write w"))).id)
        assert done.status.state == COMPLETED
        deadline = time.monotonic() + 10
        while len([s for s in collected.of_task(done.id) if s["name"] == "a2a.call_model"]) < 3:
            assert time.monotonic() < deadline, "the model calls' spans never arrived"
            time.sleep(0.1)
        spans = [s for s in collected.of_task(done.id) if s["name"] == "a2a.call_model"]
    recorded = rows(
        database_url,
        "SELECT input_tokens, output_tokens, cache_read_tokens FROM model_calls ORDER BY at",
    )
    shown = sorted(
        (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"],
         a["gen_ai.usage.cache_read_tokens"])
        for a in (s["attributes"] for s in spans)
    )  # fmt: skip
    assert shown == sorted(recorded) and (1234, 56, 7) in shown


async def test_json_lines_hold_no_secret_the_service_was_given(
    start_agent: StartAgent, fake: FakeAnthropic
) -> None:
    fake.add(text_reply("Nothing to do.", input_tokens=10))
    key = secret("sk-ant-json-lines-key")
    env = {**model_env(fake), "ANTHROPIC_API_KEY": key, "A2A_AGENT_INSECURE_OPEN": "0"}
    server = start_agent(
        "serve", "obs-s", A2A_AGENT_LOG_FORMAT="json", A2A_AGENT_LOG_LEVEL="debug", **env
    )
    caller = make_key(server, "ops", "read", "submit")
    async with a2a_client(server.url, key=caller) as client:
        await wait_for(client, (await send(client, text_message("say hi"))).id, timeout=60)
    log = server.log()
    assert '"task_id"' in log  # the run was logged, in JSON lines
    # a2a_<id>_<secret>: the secret is everything after the second "_" (it may hold "_" too)
    assert key not in log and caller not in log and caller.split("_", 2)[2] not in log
