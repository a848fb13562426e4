"""Reads of the checks: each output's checks against its lineage's active wishes, from the
log's ``output.checked`` events (one per try at a cycle's output: the output and its revision).
No projection: an output's few events are found by lineage (indexed) and artifact."""

from __future__ import annotations

import json

from sqlalchemy import TextClause, text

from domain.checks import CheckResult, OutputChecks
from domain.events import OutputChecked
from store.eventstore import upcasters
from store.views.reader import ViewReader

_CHECKED = (
    "SELECT e.artifact_id, p.content, e.schema_version FROM training_events e"
    " JOIN payload_blobs p ON p.hash = e.payload_hash"
    " WHERE e.lineage_id = :lineage AND e.event_type = :type"
)
_ALL = text(_CHECKED + " ORDER BY e.position")
_ONE = text(_CHECKED + " AND e.artifact_id = :artifact ORDER BY e.position")


class CheckView(ViewReader):
    """Checks of outputs, by artifact."""

    def output_checks(self, lineage_id: str) -> dict[str, OutputChecks]:
        """artifact id → the checks of the output shown for it, and whether it was revised
        (every output of the lineage: the report's rates)."""
        return self._checks(_ALL, {"lineage": lineage_id})

    def output_checks_of(self, lineage_id: str, artifact_id: str) -> OutputChecks | None:
        """One output's checks (None: it was never checked, no wish was active)."""
        found = self._checks(_ONE, {"lineage": lineage_id, "artifact": artifact_id})
        return found.get(artifact_id)

    def _checks(self, query: TextClause, params: dict[str, str]) -> dict[str, OutputChecks]:
        tries: dict[str, list[OutputChecked]] = {}
        with self.engine.connect() as conn:
            rows = conn.execute(query, {**params, "type": OutputChecked.event_type}).all()
        for artifact_id, content, version in rows:
            if artifact_id:
                payload, _ = upcasters.upcast(
                    OutputChecked.event_type, version or 1, json.loads(content), {}
                )
                tries.setdefault(artifact_id, []).append(OutputChecked.read(payload))
        found = {}
        for artifact_id, checked in tries.items():
            shown = next((c for c in checked if c.chosen), None)
            if shown is None:
                continue
            own = min(checked, key=lambda c: c.revision)
            found[artifact_id] = OutputChecks(
                checks=_results(shown),
                tries=len({c.revision for c in checked}),
                revised=shown.revision > 0,
                own=_results(own),
            )
        return found


def _results(checked: OutputChecked) -> list[CheckResult]:
    return [CheckResult.model_validate(c.model_dump()) for c in checked.checks]
