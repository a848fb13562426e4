"""TrainingSignalRecorder: the one object activities write through, one class per subdomain
over the one write path (``store.eventstore.event_writer``)."""

from __future__ import annotations

from sqlalchemy import Engine

from store.eventstore.chain_keys import UNKEYED, ChainKeys
from store.records import projections
from store.records.attempt_records import AttemptRecords
from store.records.correction_records import CorrectionRecords
from store.records.dataset_records import DatasetRecords
from store.records.feedback_records import FeedbackRecords
from store.records.lineage_records import LineageRecords


class TrainingSignalRecorder(
    LineageRecords, AttemptRecords, FeedbackRecords, CorrectionRecords, DatasetRecords
):
    """Sessions and lineages, attempts and spans, human feedback and corrections of its
    reading, Lightning datasets."""

    def __init__(self, engine: Engine, keys: ChainKeys = UNKEYED) -> None:
        super().__init__(engine, projections, keys)
