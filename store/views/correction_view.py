"""Reads of the corrections view: the labelled examples raters made by correcting a reading."""

from __future__ import annotations

import json

from sqlalchemy import Select, bindparam, select

from domain.corrections import MAX_EXAMPLES_LOADED, LabelledExample
from store.tables import ReadingCorrectionRow
from store.views.reader import ViewReader

_corrections = ReadingCorrectionRow.__table__  # type: ignore[attr-defined]


def _latest(of_session: bool) -> Select:
    c = _corrections.c
    statement = select(_corrections)
    if of_session:
        statement = statement.where(c.session_id == bindparam("session_id"))
    # latest first, so the limit keeps the newest; the caller gets them oldest first
    return statement.order_by(c.created_at.desc(), c.id.desc()).limit(bindparam("limit"))


_OF_SESSION, _OF_ALL = _latest(True), _latest(False)


class CorrectionView(ViewReader):
    """Labelled examples: comment → corrected wants, by session or across sessions."""

    def labelled_examples(
        self, session_id: str | None = None, limit: int = MAX_EXAMPLES_LOADED
    ) -> list[LabelledExample]:
        """The latest ``limit`` corrections of a session (of every session when None), in the
        order they were made."""
        statement = _OF_ALL if session_id is None else _OF_SESSION
        params: dict[str, object] = {"limit": max(0, limit)}
        if session_id is not None:
            params["session_id"] = session_id
        with self.engine.connect() as conn:
            rows = conn.execute(statement, params).mappings().all()
        return [
            LabelledExample(
                correction_id=r["id"],
                session_id=r["session_id"],
                lineage_id=r["lineage_id"],
                evaluation_id=r["evaluation_id"],
                comment=r["comment"],
                read_as=json.loads(r["read_as"]),
                corrected=json.loads(r["corrected"]),
                rater=r["rater"],
                created_at=r["created_at"],
            )
            for r in reversed(rows)
        ]
