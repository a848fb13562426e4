"""Process-wide OpenTelemetry setup: one TracerProvider with the execution-span collector, OTLP
export when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set, and Temporal's tracing interceptor."""

from __future__ import annotations

import os
import threading

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from temporalio.contrib.opentelemetry import TracingInterceptor

from domain.settings import otlp_configured
from runner.tracer import ExecutionSpanCollector

_lock = threading.Lock()
_provider: TracerProvider | None = None
_collector = ExecutionSpanCollector()


def collector() -> ExecutionSpanCollector:
    return _collector


def tracer_provider() -> TracerProvider:
    """Created once per process (OpenTelemetry allows one global provider)."""
    global _provider
    with _lock:
        if _provider is None:
            service = os.environ.get("OTEL_SERVICE_NAME", "training-camp")
            _provider = TracerProvider(resource=Resource.create({"service.name": service}))
            _provider.add_span_processor(_collector)
            if otlp_configured():
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
                from opentelemetry.sdk.trace.export import BatchSpanProcessor

                _provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            trace.set_tracer_provider(_provider)
        return _provider


def runner_tracer() -> trace.Tracer:
    return tracer_provider().get_tracer("training_camp.runner")


def tracing_interceptor() -> TracingInterceptor:
    """Links client, workflow, activity and agent spans into one trace (with
    ``Settings.temporal_tracing``). Workflow spans are made under a client's span (the starter
    and workers connect with this interceptor); a workflow started elsewhere (CLI, UI) makes
    none, as the SDK recommends: they would be orphans after a replay, and cost every
    activation."""
    return TracingInterceptor(tracer_provider().get_tracer("temporalio"))
