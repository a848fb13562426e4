"""The events of an attempt that two record paths share (a lineage's attempt, a Lightning
client's rollout report): span batches, completion, and the tags they carry."""

from __future__ import annotations

import hashlib
from typing import Any

from domain.execution import SpanRecord, Usage
from store.event_log import NewEvent

_OPTIONAL_SPAN_FIELDS = (
    ("parentSpanId", "parent_span_id"),
    ("name", "name"),
    ("input", "input"),
    ("output", "output"),
    ("modelId", "model_id"),
    ("promptTokens", "prompt_tokens"),
    ("completionTokens", "completion_tokens"),
    ("toolName", "tool_name"),
    ("toolArgs", "tool_args"),
    ("toolResult", "tool_result"),
    ("toolError", "tool_error"),
    ("durationMs", "duration_ms"),
    ("estimatedCost", "estimated_cost"),
    ("startedAt", "started_at"),
    ("traceId", "trace_id"),
    ("otelSpanId", "otel_span_id"),
)


def span_events(spans: list[SpanRecord], refs: dict[str, Any]) -> list[NewEvent]:
    """One ``attempt.span_recorded`` event for a batch of spans, texts inline: spans come
    in bursts (an attempt's trace, a client's report), and one log entry per burst keeps
    ingest at the cost of the span rows themselves."""
    if not spans:
        return []
    items, tags = [], set()
    for span in spans:
        item = {"spanId": span.span_id, "sequence": span.sequence, "spanType": span.span_type}
        fields = span.__dict__
        for key, attr in _OPTIONAL_SPAN_FIELDS:  # absent rather than null: smaller batches
            value = fields[attr]
            if value is not None:
                item[key] = value
        items.append(item)
        if span.span_type == "tool_call":
            tags.add("tool_use")
        if span.tool_error:
            tags.add("error")
    # Keyed by the spans it holds, so a retried write of the same batch inserts nothing.
    key = hashlib.sha256("\x1f".join([s.span_id for s in spans]).encode()).hexdigest()
    return [
        NewEvent.keyed(
            "attempt.span_recorded",
            f"{refs['attempt_id']}|{key}",
            {"spans": items},
            tags=sorted(tags),
            **refs,
        )
    ]


def completed_event(
    attempt_id: str,
    output_hash: str,
    usage: Usage,
    duration_ms: int,
    spans: list[SpanRecord],
    refs: dict[str, Any],
) -> NewEvent:
    return NewEvent.keyed(
        "attempt.completed",
        attempt_id,
        {
            "outputHash": output_hash,
            "promptTokens": usage.prompt_tokens,
            "completionTokens": usage.completion_tokens,
            "totalTokens": usage.total_tokens,
            "durationMs": duration_ms,
            "estimatedCost": usage.estimated_cost,
            "success": True,
        },
        tags=attempt_tags(spans, error=False),
        **refs,
    )


def attempt_tags(spans: list[SpanRecord], error: bool) -> list[str]:
    tags = []
    if any(s.span_type == "tool_call" for s in spans):
        tags.append("tool_use")
    if sum(1 for s in spans if s.span_type == "llm_call") > 1 or len(spans) > 3:
        tags.append("multi_step")
    if error:
        tags.append("error")
    return tags
