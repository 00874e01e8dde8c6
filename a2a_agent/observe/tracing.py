"""Traces (OpenTelemetry): one trace per task, across its whole life, whatever processes
work it and however often they are replaced.

When a task is submitted the edge makes its span (a child of the caller's, when the request
carried a W3C `traceparent`) and keeps that span's context with the task
(`tasks.trace_context`). Every step, in any worker, after any restart, is a span whose
parent is that context, so a crash and a resume stay in one trace. The exporter is
configured by the standard variables (`OTEL_TRACES_EXPORTER=otlp|console`,
`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_SERVICE_NAME`, `OTEL_BSP_*`, ...); tracing is off unless
OTEL_TRACES_EXPORTER names one, and then costs nothing but the no-op calls.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from a2a_agent.errors import ConfigError

PROPAGATOR = TraceContextTextMapPropagator()
_provider: TracerProvider | None = None


def _exporters(names: str) -> list[SpanExporter]:
    found: list[SpanExporter] = []
    for name in (n.strip() for n in names.split(",")):
        if name in ("", "none"):
            continue
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
                OTLPSpanExporter,
            )

            found.append(OTLPSpanExporter())
        elif name == "console":
            found.append(ConsoleSpanExporter())
        else:
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER {name!r}: this server knows otlp, console, none"
            )
    return found


def configure(executor_id: str, env: Mapping[str, str] | None = None) -> bool:
    """Set up the exporter the environment names (once per process); False when off."""
    global _provider  # noqa: PLW0603  (one tracer provider per process, as OpenTelemetry has it)
    env = os.environ if env is None else env
    exporters = _exporters(env.get("OTEL_TRACES_EXPORTER", "none"))
    if not exporters or _provider is not None:
        return _provider is not None
    resource = Resource.create(
        {
            "service.name": env.get("OTEL_SERVICE_NAME") or "a2a-agent",
            "service.instance.id": executor_id,
            "process.pid": os.getpid(),
        }
    )
    _provider = TracerProvider(resource=resource)
    for exporter in exporters:
        _provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(_provider)
    return True


def shutdown() -> None:
    """Send what is still buffered (at a clean exit)."""
    if _provider is not None:
        _provider.force_flush()


def _tracer() -> trace.Tracer:
    return trace.get_tracer("a2a_agent")


def _context(traceparent: str | None) -> Context | None:
    return PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None


def task_span(task_id: str, caller: str | None) -> str | None:
    """The task's own span, a child of the caller's `traceparent` when given; its context as
    a `traceparent`, which every later span of the task descends from (None when tracing is
    off and the caller sent none)."""
    if _provider is None and caller is None:
        return None  # what the no-op span gives, without making it (2 % of a send's CPU)
    with _tracer().start_as_current_span(
        "a2a.task",
        context=_context(caller),
        kind=SpanKind.SERVER,
        attributes={"a2a.task_id": task_id},
    ):
        carrier: dict[str, str] = {}
        PROPAGATOR.inject(carrier)
    return carrier.get("traceparent") or caller


@contextmanager
def step_span(name: str, traceparent: str | None, attributes: dict[str, Any]) -> Iterator[Span]:
    """A span for one step, in its task's trace (with tracing off and no trace to join,
    the no-op span as it is, without the context it would be made in)."""
    if _provider is None and traceparent is None:
        yield trace.INVALID_SPAN
        return
    with _tracer().start_as_current_span(
        name, context=_context(traceparent), attributes=attributes, record_exception=True
    ) as span:
        yield span


def outcome(span: Span, result: Mapping[str, Any]) -> None:
    """What a step's result says, on its span: the outcome, and a model call's tokens."""
    span.set_attribute("a2a.outcome", str(result.get("outcome")))
    payload = result.get("payload") or {}
    usage = payload.get("usage") if isinstance(payload, Mapping) else None
    if isinstance(usage, Mapping):
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
            if name in usage:
                span.set_attribute(f"gen_ai.usage.{name}", int(usage[name]))
    if result.get("outcome") in ("failed", "stopped"):
        span.set_status(Status(StatusCode.ERROR, str(result.get("outcome"))))
