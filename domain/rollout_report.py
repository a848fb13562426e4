"""The Rollout report of the server-client seed: what a run tells an optimization algorithm."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Triplet(BaseModel):
    """One turn: what the model was given, what it answered, and (optionally) a step reward."""

    prompt: Any
    response: Any
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class RolloutReport(BaseModel):
    rollout_id: str
    final_reward: float | None = None
    triplets: list[Triplet] | None = None
    trace_data: dict[str, Any] | None = None  # OTLP/JSON-shaped OpenTelemetry spans
    logs: list[str] | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
