"""Reads of the checks: each output's checks against its lineage's active wishes, from the
log's ``output.checked`` events (a lineage has one per try at a cycle's output: few)."""

from __future__ import annotations

from domain.checks import CheckResult, OutputChecks
from domain.events import OutputChecked
from store.eventstore import event_log
from store.views.reader import ViewReader


class CheckView(ViewReader):
    """Checks of outputs, by artifact."""

    def output_checks(self, lineage_id: str) -> dict[str, OutputChecks]:
        """artifact id → the checks of the output shown for it, and whether it was revised."""
        tries: dict[str, list[OutputChecked]] = {}
        with self.engine.connect() as conn:
            for event in event_log.read(
                conn, lineage_id=lineage_id, event_types=[OutputChecked.event_type]
            ):
                data = event.data
                if isinstance(data, OutputChecked) and event.artifact_id:
                    tries.setdefault(event.artifact_id, []).append(data)
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
