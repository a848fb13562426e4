"""Reads of the log itself: its events (upcast, with their payloads), and how many rows and
payload bytes the store holds."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, SQLModel, select

from store.eventstore import event_log
from store.eventstore.event_log import StoredEvent
from store.tables import PayloadBlob, TrainingEvent
from store.views.reader import ViewReader


class LogView(ViewReader):
    """Events, counts, payload sizes."""

    def events(
        self, lineage_id: str | None = None, event_types: list[str] | None = None
    ) -> list[StoredEvent]:
        with self.engine.connect() as conn:
            return list(event_log.read(conn, lineage_id=lineage_id, event_types=event_types))

    def count(self, table: type[SQLModel]) -> int:
        with Session(self.engine) as session:
            return int(session.exec(select(func.count()).select_from(table)).one())

    def blob_stats(self) -> tuple[int, int]:
        """(number of blobs, total bytes)."""
        with Session(self.engine) as session:
            n, size = session.exec(
                select(func.count(), func.coalesce(func.sum(PayloadBlob.size), 0))
            ).one()
            return int(n), int(size)

    def event_count(self) -> int:
        return self.count(TrainingEvent)
