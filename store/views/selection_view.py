"""Reads for selection across a session's lineages: its champion, the latest promotion (a
lineage's branch origin, inputs and standing wishes are the lineage view's)."""

from __future__ import annotations

import json

from sqlalchemy import text

from domain.events import LineagePromoted
from store.views.lineage_view import LineageView

_PROMOTIONS = text(
    "SELECT e.lineage_id, p.content FROM training_events e"
    " JOIN payload_blobs p ON p.hash = e.payload_hash"
    " WHERE e.event_type = :type AND e.session_id = :session ORDER BY e.position DESC"
)


class SelectionView(LineageView):
    """The champion of a session."""

    def champion(self, session_id: str) -> tuple[str, LineagePromoted] | None:
        """The session's champion, the latest promoted: (lineage id, the promotion)."""
        with self.engine.connect() as conn:
            row = conn.execute(
                _PROMOTIONS, {"type": LineagePromoted.event_type, "session": session_id}
            ).first()
        if row is None:
            return None
        lineage_id, content = row
        return lineage_id, LineagePromoted.read(json.loads(content))
