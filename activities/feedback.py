"""Recording human feedback the cycle step does not take: rejected signals, directives, locks
and promotions (a score is recorded by the cycle step, ``activities/trainer.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from domain.lineage import (
    RecordDirectiveInput,
    RecordLockInput,
    RecordPromotionInput,
    RecordRaterScoreInput,
    RecordRejectionInput,
)
from store import Store

FeedbackInput = RecordRejectionInput | RecordDirectiveInput | RecordLockInput


def _recording(name: str, input_type: type[FeedbackInput]) -> Callable[..., None]:
    """One recording activity: its input, as the workflow sends it, to the store's feedback
    recorder. The activities differ only in name and input type (the workflow and its saved
    histories name them), so they are made here, once."""

    def record(self: FeedbackActivities, inp: Any) -> None:
        self.store.recorder.record_feedback(inp)

    record.__name__ = record.__qualname__ = name
    # Temporal decodes the input by this annotation
    record.__annotations__ = {"inp": input_type, "return": None}
    return activity.defn(name=name)(record)


class FeedbackActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    record_rejection = _recording("record_rejection", RecordRejectionInput)
    record_directive = _recording("record_directive", RecordDirectiveInput)
    record_lock = _recording("record_lock", RecordLockInput)

    @activity.defn(name="record_rater_score")
    def record_rater_score(self, inp: RecordRaterScoreInput) -> None:
        """One rater's score on an output awaiting several (``options.raters``)."""
        self.store.recorder.record_rater_score(inp)

    @activity.defn(name="record_promotion")
    def record_promotion(self, inp: RecordPromotionInput) -> dict[str, float | None]:
        """The session's champion, locked unless it was; its competitors' latest scores."""
        return self.store.recorder.record_promotion(inp)
