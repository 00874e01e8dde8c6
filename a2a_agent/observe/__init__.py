"""Seeing the service from outside: structured logs, OpenTelemetry traces, Prometheus metrics."""
