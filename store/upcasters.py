"""Schema versions and upcasters: old events are read in today's shape, never rewritten.

Each event type has a current schema version; an event stored under an older one passes through
the chain of upcasters (v1 → v2 → …) when it is read. Add a version by bumping CURRENT and adding
the step from the previous one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

CURRENT: dict[str, int] = {
    # v2: the evaluation's identity and context travel with the score
    "artifact.scored": 2,
    # v2: one event holds a batch of spans, texts inline ({"spans": [...]}); v1 held one span
    # with its input and output behind content hashes
    "attempt.span_recorded": 2,
}

Upcaster = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _scored_v1_to_v2(payload: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """v1 is the seed recorder's shape: {score, comment?, artifactContent?}."""
    artifact_id = event.get("artifact_id") or ""
    rollout_id = artifact_id.removesuffix(":artifact")
    cycle = re.search(r":c(\d+)", rollout_id)
    return {
        "evaluationId": f"{artifact_id}:evaluation:{event['id']}",
        "rolloutId": rollout_id,
        "cycle": int(cycle.group(1)) if cycle else 0,
        "agentVersion": None,  # v1 did not record it
        "score": payload["score"],
        "comment": payload.get("comment"),
        "rater": None,
    }


def _span_v1_to_v2(payload: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """A batch of one; its inputHash/outputHash stay references (projections resolve them)."""
    return {"spans": [payload]}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("artifact.scored", 1): _scored_v1_to_v2,
    ("attempt.span_recorded", 1): _span_v1_to_v2,
}


def current_version(event_type: str) -> int:
    return CURRENT.get(event_type, 1)


def upcast(
    event_type: str, version: int, payload: dict[str, Any], event: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """The payload in the current schema of its event type (and that version)."""
    target = current_version(event_type)
    while version < target:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise ValueError(f"no upcaster for {event_type} v{version} → v{version + 1}")
        payload = step(payload, event)
        version += 1
    return payload, version
