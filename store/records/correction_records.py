"""Records of corrected readings: a rater's labelled example, one event per correction."""

from __future__ import annotations

from domain.corrections import Correction
from domain.events import ReadingCorrected
from store.eventstore.event_log import NewEvent
from store.eventstore.event_writer import EventWriter, now_ms


class CorrectionRecords(EventWriter):
    """Corrections of how the trainer read a comment (``reading.corrected``)."""

    def record_correction(self, correction: Correction) -> bool:
        """Append the correction and its labelled example; True if it was new. Keyed by its
        ``correction_id`` (``domain.corrections.correction_key``): sent again, it is written
        once and this returns False."""
        c = Correction.model_validate(correction.model_dump())  # validated at the door
        event = ReadingCorrected(
            correction_id=c.correction_id,
            session_id=c.session_id,
            lineage_id=c.lineage_id,
            evaluation_id=c.evaluation_id,
            comment=c.comment,
            read_as=c.read_as,
            corrected=[w.strip().lower() for w in c.corrected],
            rater=c.rater,
            cycle=c.cycle,
        )
        inserted = self._write(
            [
                NewEvent.of(
                    event,
                    c.correction_id,
                    session_id=c.session_id,
                    lineage_id=c.lineage_id,
                    timestamp=now_ms(),
                    tags=["correction"],
                )
            ]
        )
        return bool(inserted)
