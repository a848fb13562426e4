"""Tracer: OpenTelemetry spans for every step of an attempt, persisted as execution spans.

The executor opens spans through ``AgentTracer`` (GenAI semantic-convention attributes where they
fit, ``training_camp.*`` for the rest). ``ExecutionSpanCollector`` is a span processor: it numbers
an attempt's spans in start order, maps OpenTelemetry parents to execution-span parents, and turns
finished spans into ``SpanRecord``s (parent, sequence, tokens, duration, cost) that the agent
activity writes in the attempt's transaction. Other processors (OTLP export) see the same spans.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.trace import Status, StatusCode

from domain.execution import SpanRecord

# training_camp.* attributes (GenAI conventions have no place for these)
SPAN_TYPE = "training_camp.span_type"
ATTEMPT_ID = "training_camp.attempt_id"
SPAN_ID = "training_camp.span_id"
SEQUENCE = "training_camp.sequence"
STEP = "training_camp.step"
INPUT = "training_camp.input"
OUTPUT = "training_camp.output"
TOOL_ARGS = "training_camp.tool.arguments"
TOOL_RESULT = "training_camp.tool.result"
TOOL_ERROR = "training_camp.tool.error"
COST = "training_camp.cost_usd"
# OpenTelemetry GenAI semantic conventions
OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_TOP_P = "gen_ai.request.top_p"
RESPONSE_MODEL = "gen_ai.response.model"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"


class ExecutionSpanCollector(SpanProcessor):
    """Collects the spans of running attempts; thread-safe, one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, list[SpanRecord]] = {}
        self._sequence: dict[str, int] = {}
        self._ids: dict[int, str] = {}  # OpenTelemetry span id → execution span id

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attempt_id = (span.attributes or {}).get(ATTEMPT_ID)
        if not isinstance(attempt_id, str):
            return
        with self._lock:
            seq = self._sequence.get(attempt_id, 0) + 1
            self._sequence[attempt_id] = seq
            span_id = f"{attempt_id}:s{seq}"
            self._ids[span.context.span_id] = span_id
        span.set_attribute(SEQUENCE, seq)
        span.set_attribute(SPAN_ID, span_id)

    def on_end(self, span: ReadableSpan) -> None:
        attrs = span.attributes or {}
        attempt_id = attrs.get(ATTEMPT_ID)
        if not isinstance(attempt_id, str) or SPAN_TYPE not in attrs:
            return
        parent = span.parent.span_id if span.parent is not None else None
        with self._lock:
            parent_id = self._ids.get(parent) if parent is not None else None
            record = _to_record(span, attrs, parent_id)
            self._records.setdefault(attempt_id, []).append(record)

    def drain(self, attempt_id: str) -> list[SpanRecord]:
        """The attempt's finished spans in sequence order; forgets them."""
        with self._lock:
            records = self._records.pop(attempt_id, [])
            self._sequence.pop(attempt_id, None)
            prefix = f"{attempt_id}:s"
            for key in [k for k, v in self._ids.items() if v.startswith(prefix)]:
                del self._ids[key]
        return sorted(records, key=lambda r: r.sequence)

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def _to_record(span: ReadableSpan, attrs: Any, parent_id: str | None) -> SpanRecord:
    start, end = span.start_time or 0, span.end_time or span.start_time or 0
    args = attrs.get(TOOL_ARGS)
    return SpanRecord(
        span_id=str(attrs[SPAN_ID]),
        parent_span_id=parent_id,
        sequence=int(attrs[SEQUENCE]),
        span_type=str(attrs[SPAN_TYPE]),
        name=str(attrs.get(STEP) or span.name),
        input=attrs.get(INPUT),
        output=attrs.get(OUTPUT),
        model_id=attrs.get(RESPONSE_MODEL) or attrs.get(REQUEST_MODEL),
        prompt_tokens=_int(attrs.get(INPUT_TOKENS)),
        completion_tokens=_int(attrs.get(OUTPUT_TOKENS)),
        tool_name=attrs.get(TOOL_NAME),
        tool_args=json.loads(args) if isinstance(args, str) else None,
        tool_result=attrs.get(TOOL_RESULT),
        tool_error=attrs.get(TOOL_ERROR),
        duration_ms=max(0, (end - start) // 1_000_000),
        estimated_cost=attrs.get(COST),
        started_at=start // 1_000_000,
        trace_id=format(span.context.trace_id, "032x"),
        otel_span_id=format(span.context.span_id, "016x"),
    )


class AgentTracer:
    """Opens the spans of one attempt; parents are explicit (data flow, not call nesting)."""

    def __init__(self, tracer: trace.Tracer, attempt_id: str, provider: str) -> None:
        self._tracer = tracer
        self._attempt_id = attempt_id
        self._provider = provider

    @contextmanager
    def span(
        self, span_type: str, name: str, parent: trace.Span | None = None, **attributes: Any
    ) -> Iterator[trace.Span]:
        context = trace.set_span_in_context(parent) if parent is not None else None
        attrs = {SPAN_TYPE: span_type, ATTEMPT_ID: self._attempt_id, PROVIDER: self._provider}
        attrs.update({k: v for k, v in attributes.items() if v is not None})
        with self._tracer.start_as_current_span(
            name,
            context=context,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc)[:500]))
                raise


def set_if(span: trace.Span, **attributes: Any) -> None:
    for key, value in attributes.items():
        if value is not None:
            span.set_attribute(key, value)
