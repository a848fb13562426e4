"""A cycle of a lineage: one input, one rollout (its attempts, each with spans), one artifact
that awaits an evaluation. The ids its records carry are derived here, and only here, from the
lineage and the cycle's number: a retried or replayed step derives the same ids, so it writes
nothing twice."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ROLLOUT = re.compile(r"^(?P<lineage>.+):c(?P<number>\d+)(?:-v\d+)?(?:-retry\d+)?$")


@dataclass(frozen=True, slots=True)
class Cycle:
    lineage_id: str
    number: int

    def rollout_id(self, retry: int = 0, rerun_by: int | None = None) -> str:
        """The cycle's rollout; one started again by hand after every attempt failed (the
        ``retry`` signal) is a rollout of its own, and so is the cycle run again by the
        version a corrected reading made (``rerun_by``: that version)."""
        rollout = f"{self.lineage_id}:c{self.number}"
        if rerun_by is not None:
            rollout += f"-v{rerun_by}"
        return f"{rollout}-retry{retry}" if retry else rollout

    @classmethod
    def of_rollout(cls, rollout_id: str) -> Cycle | None:
        """The cycle a lineage's rollout id belongs to (None for other rollouts, such as a
        dataset task's)."""
        match = _ROLLOUT.match(rollout_id)
        return cls(match["lineage"], int(match["number"])) if match else None


def attempt_of(rollout_id: str, number: int) -> str:
    """Attempt ``number`` (1-based) at a rollout."""
    return f"{rollout_id}:a{number}"


def artifact_of(rollout_id: str) -> str:
    """The output a rollout produced (one per rollout: its successful attempt's)."""
    return f"{rollout_id}:artifact"


def rollout_of_artifact(artifact: str) -> str:
    return artifact.removesuffix(":artifact")


def comparison_id(session_id: str, cycle: int) -> str:
    """The session-wide comparison of every lineage's output for one cycle."""
    return f"{session_id}:c{cycle}"
