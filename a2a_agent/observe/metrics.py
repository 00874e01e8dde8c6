"""/metrics in Prometheus's text format (the official client), for an operator's monitoring.

Read from the database when scraped, so any API replica reports the whole service: tasks by
state, item outcomes, steps and how long they took, steps re-run after crashes, model tokens
and cost, budget stops, approvals waiting and the oldest wait, push deliveries by outcome,
the outbox's depth, each worker's heartbeat age, and takeovers of dead workers' runs. The
route needs a key with the `operator` scope (Prometheus sends it as a bearer token).
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

BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Families(Collector):
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def families(found: dict[str, Any]) -> list[Metric]:
    """The metric families for one reading of the database."""
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
    seconds = HistogramMetricFamily(
        "a2a_step_duration_seconds", "From a step's start to its record", labels=["step"]
    )
    for step, s in sorted((found.get("steps") or {}).items()):
        steps.add_metric([step], s["completed"])
        reruns.add_metric([step], s["reruns"])
        buckets = [(str(bound), count) for bound, count in s["buckets"]]
        buckets.append(("+Inf", s["completed"]))
        seconds.add_metric([step], buckets, s["seconds"])
    out += [steps, reruns, seconds]
    tokens = CounterMetricFamily("a2a_model_tokens", "Model tokens", labels=["kind"])
    for kind in ("input", "output", "cache_read", "cache_write"):
        tokens.add_metric([kind], (found.get("tokens") or {}).get(kind, 0))
    out += [
        tokens,
        CounterMetricFamily(
            "a2a_model_calls", "Model calls", value=(found.get("tokens") or {}).get("calls", 0)
        ),
        CounterMetricFamily("a2a_model_cost_usd", "Model spend in USD", value=found.get("usd", 0)),
        CounterMetricFamily(
            "a2a_budget_stops", "Runs stopped by their budget", value=found.get("budget_stops", 0)
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
        "a2a_push_notifications_delivered", "Notifications a receiver took (2xx)",
        value=push.get("delivered", 0),
    )  # fmt: skip
    configs = GaugeMetricFamily("a2a_push_configs", "Push configs by state", labels=["state"])
    for state in ("active", "retrying", "dead"):
        configs.add_metric([state], push.get(state, 0))
    out += [
        deliveries,
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
    takeovers = found.get("takeovers") or {}
    out += [
        workers,
        CounterMetricFamily(
            "a2a_worker_takeovers",
            "Dead workers whose runs a live one took over",
            value=takeovers.get("count", 0),
        ),
        CounterMetricFamily(
            "a2a_worker_takeover_runs",
            "Runs taken over from dead workers",
            value=takeovers.get("runs", 0),
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
            found = await store.metrics(BUCKETS)
        except StoreUnavailable:
            return JSONResponse({"error": "the database is unavailable"}, status_code=503)
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Families(families(found)))
        return Response(generate_latest(registry), media_type=CONTENT_TYPE)

    return Route("/metrics", metrics, methods=["GET"])
