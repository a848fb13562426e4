"""What one execution produced: its spans and its token usage (runner → store)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class SpanRecord(BaseModel):
    """One execution span as the runner produced it. Temporal carries it by attribute name;
    the training-signal log stores it under camelCase keys (``SpansRecorded``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    span_id: str
    parent_span_id: str | None = None
    sequence: int
    span_type: str
    name: str | None = None
    input: str | None = None
    output: str | None = None
    model_id: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_result: str | None = None
    tool_error: str | None = None
    duration_ms: int = 0
    estimated_cost: float | None = None
    started_at: int | None = None  # epoch ms
    trace_id: str | None = None  # OpenTelemetry ids, to find the span in an external backend
    otel_span_id: str | None = None


CUT_OFF = "max_tokens"  # the Messages API's stop_reason for an answer cut at the token limit


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


def preview_of(text: str, limit: int = 600) -> str:
    """The start of an output for a glance (Temporal carries it; the store has the whole): cut
    at the last whitespace before ``limit``, never inside a word, and marked as cut."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + " …"
