"""Reads of the feedback view: scores, and the directives and rejections each lineage took, in
the order it took them."""

from __future__ import annotations

from typing import TypeVar

from sqlmodel import col, select

from store.tables import DirectiveRow, EvaluationRow, RejectedFeedbackRow
from store.views.lineage_view import LineageView


class FeedbackView(LineageView):
    """Scores, rejections, directives (a session's scores by its lineages)."""

    def evaluations(self, lineage_id: str) -> list[EvaluationRow]:
        return self._all(
            select(EvaluationRow)
            .where(EvaluationRow.lineage_id == lineage_id)
            .order_by(col(EvaluationRow.created_at))
        )

    def rejected_feedback(self, lineage_id: str) -> list[RejectedFeedbackRow]:
        return _in_arrival_order(
            self._all(
                select(RejectedFeedbackRow)
                .where(RejectedFeedbackRow.lineage_id == lineage_id)
                .order_by(col(RejectedFeedbackRow.created_at))
            )
        )

    def directives(self, lineage_id: str) -> list[DirectiveRow]:
        return _in_arrival_order(
            self._all(
                select(DirectiveRow)
                .where(DirectiveRow.lineage_id == lineage_id)
                .order_by(col(DirectiveRow.created_at))
            )
        )

    def step_directives(
        self, lineage_id: str, through: int, oneshot_after: int
    ) -> tuple[list[str], list[str]]:
        """What a cycle step applies (``CycleStepInput.directives_through``): the sticky
        directives up to place ``through`` in the lineage's feedback sequence, and the oneshot
        ones after ``oneshot_after`` up to it, each in the order the lineage took them."""
        sticky: list[str] = []
        oneshot: list[str] = []
        for row in self.directives(lineage_id):
            place = _feedback_place(row.id)
            if place is None or place > through:
                continue
            if row.kind == "sticky":
                sticky.append(row.content)
            elif place > oneshot_after:
                oneshot.append(row.content)
        return sticky, oneshot


FeedbackRowT = TypeVar("FeedbackRowT", RejectedFeedbackRow, DirectiveRow)


def _in_arrival_order(rows: list[FeedbackRowT]) -> list[FeedbackRowT]:
    """Directives and rejections in the order the lineage took them: the place in its sequence
    of feedback that each id carries (``domain.lineage.feedback_key``). Signals that one
    workflow task handles are recorded by concurrent steps, whose timestamps need not follow
    that order; rows whose id carries no place keep their timestamps' order."""
    places = [_feedback_place(row.id) for row in rows]
    if None in places:
        return rows
    return [row for _, row in sorted(zip(places, rows, strict=True), key=lambda p: p[0])]


def _feedback_place(feedback_id: str) -> int | None:
    parts = feedback_id.rsplit(":", 2)  # "lineage:kind", place, digest
    return int(parts[1]) if len(parts) == 3 and parts[1].isdigit() else None
