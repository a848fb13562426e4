"""Adapter: execution spans → triplets and OpenTelemetry trace data (the Rollout report)."""

from __future__ import annotations

import json
from typing import Any

from domain.execution import SpanRecord
from domain.rollout_report import RolloutReport, Triplet


def to_triplets(spans: list[SpanRecord]) -> list[Triplet]:
    """One triplet per model call, with the tools it asked for in the metadata."""
    children: dict[str | None, list[SpanRecord]] = {}
    for span in spans:
        children.setdefault(span.parent_span_id, []).append(span)
    triplets = []
    for span in spans:
        if span.span_type != "llm_call":
            continue
        tools = [c.tool_name for c in children.get(span.span_id, []) if c.span_type == "tool_call"]
        triplets.append(
            Triplet(
                prompt=span.input,
                response=span.output,
                metadata={
                    "span_id": span.span_id,
                    "step": span.name,
                    "model": span.model_id,
                    "prompt_tokens": span.prompt_tokens,
                    "completion_tokens": span.completion_tokens,
                    "tool_calls": tools,
                },
            )
        )
    return triplets


def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    if not isinstance(value, str):
        value = json.dumps(value, sort_keys=True)
    return {"key": key, "value": {"stringValue": value}}


def to_trace_data(spans: list[SpanRecord], service: str = "training-camp") -> dict[str, Any]:
    """OTLP/JSON ``resourceSpans`` for the attempt, importable by OpenTelemetry tooling."""
    by_id = {s.span_id: s for s in spans}
    otel_spans = []
    for span in spans:
        start_ns = (span.started_at or 0) * 1_000_000
        parent = by_id.get(span.parent_span_id or "")
        attributes = {
            "training_camp.span_type": span.span_type,
            "training_camp.span_id": span.span_id,
            "training_camp.sequence": span.sequence,
            "gen_ai.request.model": span.model_id,
            "gen_ai.usage.input_tokens": span.prompt_tokens,
            "gen_ai.usage.output_tokens": span.completion_tokens,
            "gen_ai.tool.name": span.tool_name,
            "training_camp.tool.error": span.tool_error,
            "training_camp.cost_usd": span.estimated_cost,
        }
        otel_spans.append(
            {
                "traceId": span.trace_id,
                "spanId": span.otel_span_id,
                "parentSpanId": parent.otel_span_id if parent else None,
                "name": f"{span.span_type} {span.name or ''}".strip(),
                "startTimeUnixNano": str(start_ns),
                "endTimeUnixNano": str(start_ns + span.duration_ms * 1_000_000),
                "attributes": [_attribute(k, v) for k, v in attributes.items() if v is not None],
                "status": {"code": 2 if span.tool_error else 1},
            }
        )
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attribute("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "training_camp.runner"}, "spans": otel_spans}],
            }
        ]
    }


def rollout_report(
    rollout_id: str, spans: list[SpanRecord], final_reward: float | None
) -> RolloutReport:
    cost = sum(s.estimated_cost or 0.0 for s in spans)
    return RolloutReport(
        rollout_id=rollout_id,
        final_reward=final_reward,
        triplets=to_triplets(spans),
        trace_data=to_trace_data(spans),
        metrics={
            "llm_calls": float(sum(1 for s in spans if s.span_type == "llm_call")),
            "tool_calls": float(sum(1 for s in spans if s.span_type == "tool_call")),
            "prompt_tokens": float(sum(s.prompt_tokens or 0 for s in spans)),
            "completion_tokens": float(sum(s.completion_tokens or 0 for s in spans)),
            "estimated_cost": round(cost, 8),
        },
    )
