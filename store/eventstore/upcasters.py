"""Upcasters: old events are read in today's shape, never rewritten.

Each event class (``domain/events.py``) has a current ``schema_version``; an event stored under an
older one passes through the chain of upcasters (v1 → v2 → …) when it is read. Add a version by
bumping the class's ``schema_version`` and adding the step from the previous one here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from domain.cycle import Cycle, rollout_of_artifact
from domain.events import EVENT_CLASSES, ArtifactScored, OutputChecked, SpansRecorded

CURRENT: dict[str, int] = {name: cls.schema_version for name, cls in EVENT_CLASSES.items()}

Upcaster = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def _scored_v1_to_v2(payload: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """v1 is the seed recorder's shape: {score, comment?, artifactContent?}."""
    artifact_id = event.get("artifact_id") or ""
    rollout_id = rollout_of_artifact(artifact_id)
    cycle = Cycle.of_rollout(rollout_id)
    return {
        "evaluationId": f"{artifact_id}:evaluation:{event['id']}",
        "rolloutId": rollout_id,
        "cycle": cycle.number if cycle else 0,
        "agentVersion": None,  # v1 did not record it
        "score": payload["score"],
        "comment": payload.get("comment"),
        "rater": None,
    }


def _span_v1_to_v2(payload: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """A batch of one; its texts stay behind their content hashes (the projection reads them)."""
    span = {k: v for k, v in payload.items() if k not in ("inputHash", "outputHash")}
    hashes = (payload.get("inputHash"), payload.get("outputHash"))
    return {"spans": [span], "textHashes": {payload["spanId"]: list(hashes)}}


# what v1 stored as the measure of plain language it could not measure (trainer/checks.py)
_PLAIN_NOT_MEASURED = ("no readability measure for ", "no text to measure")


def _checked_v1_to_v2(payload: dict[str, Any], event: dict[str, Any]) -> dict[str, Any]:
    """v1 did not store that a check was "not checked": it read back as a failure. The one
    check v1 wrote so (plain language with no readability measure) is told by its measure;
    every other check was measured."""
    del event
    checks = [
        {**c, "checked": False} if _plain_not_measured(c) else c for c in payload.get("checks", [])
    ]
    return {**payload, "checks": checks}


def _plain_not_measured(check: dict[str, Any]) -> bool:
    measure = str(check.get("measure", ""))
    return check.get("family") == "simpler" and measure.startswith(_PLAIN_NOT_MEASURED)


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    (ArtifactScored.event_type, 1): _scored_v1_to_v2,
    (SpansRecorded.event_type, 1): _span_v1_to_v2,
    (OutputChecked.event_type, 1): _checked_v1_to_v2,
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
