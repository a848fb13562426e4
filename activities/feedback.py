"""Recording human feedback the cycle step does not take: rejected signals, directives and
locks (a score is recorded by the cycle step, ``activities/trainer.py``)."""

from __future__ import annotations

from temporalio import activity

from domain.lineage import RecordDirectiveInput, RecordLockInput, RecordRejectionInput
from store import Store


class FeedbackActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="record_rejection")
    def record_rejection(self, inp: RecordRejectionInput) -> None:
        self.store.recorder.record_rejection(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rejection_id=inp.rejection_id,
            cycle=inp.cycle,
            kind=inp.kind,
            payload_preview=inp.payload_preview,
            reason=inp.reason,
        )

    @activity.defn(name="record_directive")
    def record_directive(self, inp: RecordDirectiveInput) -> None:
        self.store.recorder.record_directive(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            directive_id=inp.directive_id,
            cycle=inp.cycle,
            kind=inp.kind,
            content=inp.content,
        )

    @activity.defn(name="record_lock")
    def record_lock(self, inp: RecordLockInput) -> None:
        self.store.recorder.record_lock(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            event_key=inp.event_key,
            cycle=inp.cycle,
            locked=inp.locked,
            reason=inp.reason,
        )
