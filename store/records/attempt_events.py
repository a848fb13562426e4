"""The events of an attempt that two record paths share (a lineage's attempt, a Lightning
client's rollout report): span batches, completion, and the tags they carry."""

from __future__ import annotations

import hashlib

from domain.events import AttemptCompleted, LoggedSpan, SpansRecorded
from domain.execution import SpanRecord, Usage
from store.eventstore.event_log import EventRefs, NewEvent


def span_events(spans: list[SpanRecord], refs: EventRefs) -> list[NewEvent]:
    """One ``SpansRecorded`` event for a batch of spans, texts inline: spans come in bursts
    (an attempt's trace, a client's report), and one log entry per burst keeps ingest at the
    cost of the span rows themselves."""
    if not spans:
        return []
    tags = set()
    for span in spans:
        if span.span_type == "tool_call":
            tags.add("tool_use")
        if span.tool_error:
            tags.add("error")
    # Keyed by the spans it holds, so a retried write of the same batch inserts nothing.
    key = hashlib.sha256("\x1f".join([s.span_id for s in spans]).encode()).hexdigest()
    return [
        NewEvent.of(
            SpansRecorded(spans=[LoggedSpan.of(s) for s in spans]),
            f"{refs['attempt_id']}|{key}",
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
    refs: EventRefs,
    stop_reason: str | None = None,
) -> NewEvent:
    return NewEvent.of(
        AttemptCompleted(
            output_hash=output_hash,
            stop_reason=stop_reason,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            duration_ms=duration_ms,
            estimated_cost=usage.estimated_cost,
        ),
        attempt_id,
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
