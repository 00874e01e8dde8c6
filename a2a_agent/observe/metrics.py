"""/metrics in Prometheus's text format (the official client), for an operator's monitoring.

Read from the database when scraped, so any API replica reports the whole service: tasks by
state, item outcomes, steps and how long they took, steps re-run after crashes, model tokens
and cost, budget stops, approvals waiting and the oldest wait, push deliveries by outcome,
the outbox's depth, each worker's heartbeat age, and takeovers of dead workers' runs. The
route needs a key with the `operator` scope (Prometheus sends it as a bearer token).
Counters never go down: what retention deletes was folded into totals first (functions.sql).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from persistence.errors import StoreUnavailable
from persistence.metrics import MetricsStore

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def _histograms(counters: dict[str, dict[str, float]], bounds: list[float]) -> Metric:
    """The step-duration histogram from its per-bucket counts (bucket i: the first bound a
    duration does not exceed, len(bounds) + 1 past the last), made cumulative here."""
    seconds = HistogramMetricFamily(
        "a2a_step_duration_seconds", "From a step's start to its record", labels=["step"]
    )
    per_step: dict[str, dict[int, float]] = {}
    for label, n in (counters.get("step_bucket") or {}).items():
        step, _, bucket = label.rpartition(" ")
        per_step.setdefault(step, {})[int(bucket)] = n
    for step, counts in sorted(per_step.items()):
        cumulative, running = [], 0.0
        for i, bound in enumerate(bounds, start=1):
            running += counts.get(i, 0)
            cumulative.append((str(float(bound)), running))
        cumulative.append(("+Inf", running + counts.get(len(bounds) + 1, 0)))
        seconds.add_metric([step], cumulative, (counters.get("step_seconds") or {}).get(step, 0))
    return seconds


def families(found: dict[str, Any]) -> list[Metric]:
    """The metric families for one reading of the database."""
    counters: dict[str, dict[str, float]] = found.get("counters") or {}

    def total(name: str, label: str = "") -> float:
        return (counters.get(name) or {}).get(label, 0)

    out: list[Metric] = []
    tasks = GaugeMetricFamily("a2a_tasks", "Tasks by state", labels=["state"])
    for state, n in sorted((found.get("tasks") or {}).items()):
        tasks.add_metric([state], n)
    items = GaugeMetricFamily("a2a_items", "Plan items by status", labels=["status"])
    for status, n in sorted((found.get("items") or {}).items()):
        items.add_metric([status], n)
    out += [tasks, items]
    steps = CounterMetricFamily("a2a_steps", "Keyed steps completed", labels=["step"])
    reruns = CounterMetricFamily(
        "a2a_step_reruns", "Extra runs of steps after a crash", labels=["step"]
    )
    for step, n in sorted((counters.get("steps") or {}).items()):
        steps.add_metric([step], n)
        reruns.add_metric([step], total("step_reruns", step))
    out += [steps, reruns, _histograms(counters, list(found.get("step_bounds") or []))]
    tokens = CounterMetricFamily("a2a_model_tokens", "Model tokens", labels=["kind"])
    for kind in ("input", "output", "cache_read", "cache_write"):
        tokens.add_metric([kind], total("tokens", kind))
    out += [
        tokens,
        CounterMetricFamily("a2a_model_calls", "Model calls", value=total("model_calls")),
        CounterMetricFamily("a2a_model_cost_usd", "Model spend in USD", value=total("usd")),
        CounterMetricFamily(
            "a2a_budget_stops", "Runs stopped by their budget", value=total("budget_stops")
        ),
    ]
    approvals = found.get("approvals") or {}
    out += [
        GaugeMetricFamily(
            "a2a_approvals_waiting",
            "Requests waiting for a person",
            value=approvals.get("waiting", 0),
        ),
        GaugeMetricFamily(
            "a2a_approval_oldest_wait_seconds",
            "How long the oldest waiting request has waited",
            value=approvals.get("oldest_s", 0),
        ),
    ]
    push = found.get("push") or {}
    deliveries = CounterMetricFamily(
        "a2a_push_deliveries", "Push delivery attempts by outcome (delivered: notifications a "
        "receiver took; failed: attempts that failed and were retried or dead-lettered)",
        labels=["outcome"],
    )  # fmt: skip
    for outcome in ("delivered", "failed"):
        deliveries.add_metric([outcome], total("push", outcome))
    configs = GaugeMetricFamily("a2a_push_configs", "Push configs by state", labels=["state"])
    for state in ("active", "retrying", "dead"):
        configs.add_metric([state], push.get(state, 0))
    out += [
        deliveries,
        CounterMetricFamily(
            "a2a_push_notifications_delivered",
            "Notifications a receiver took (2xx)",
            value=total("push", "delivered"),
        ),
        CounterMetricFamily(
            "a2a_push_dead_letters",
            "Times a push config gave up and went dead",
            value=total("push", "dead_lettered"),
        ),
        configs,
        GaugeMetricFamily(
            "a2a_push_outbox_depth",
            "Events not yet delivered to live push configs",
            value=found.get("outbox", 0),
        ),
    ]
    workers = GaugeMetricFamily(
        "a2a_worker_heartbeat_age_seconds", "Since each process's last heartbeat",
        labels=["executor", "role"],
    )  # fmt: skip
    for worker in found.get("workers") or []:
        workers.add_metric([worker["executor"], worker["role"]], worker["age_s"])
    out += [
        workers,
        CounterMetricFamily(
            "a2a_worker_takeovers",
            "Dead workers whose runs a live one took over",
            value=total("takeovers"),
        ),
        CounterMetricFamily(
            "a2a_worker_takeover_runs",
            "Runs taken over from dead workers",
            value=total("takeover_runs"),
        ),
    ]
    return out


def metrics_route(store: MetricsStore) -> Route:
    async def metrics(request: Request) -> Response:
        scopes = set(getattr(request.scope.get("auth"), "scopes", ()) or ())
        if "operator" not in scopes:
            return JSONResponse(
                {"error": "metrics need a key with the 'operator' scope"}, status_code=403
            )
        try:
            found = await store.metrics()
        except StoreUnavailable:
            return JSONResponse({"error": "the database is unavailable"}, status_code=503)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(families(found)))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE)

    return Route("/metrics", metrics, methods=["GET"])
