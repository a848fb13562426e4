"""TrainingSignalRecorder: the one object activities write through, one class per subdomain
over the one write path (``store.event_writer``)."""

from __future__ import annotations

from store.attempt_records import AttemptRecords
from store.dataset_records import DatasetRecords
from store.feedback_records import FeedbackRecords
from store.lineage_records import LineageRecords


class TrainingSignalRecorder(LineageRecords, AttemptRecords, FeedbackRecords, DatasetRecords):
    """Sessions and lineages, attempts and spans, human feedback, Lightning datasets."""
