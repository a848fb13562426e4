"""What every view's queries stand on: the read engine, rows read through a session or as
table models straight from Core, and content-addressed payloads (cached, since they never
change)."""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.orm import configure_mappers
from sqlmodel import Session, SQLModel

from store.eventstore import payload_store

Row = TypeVar("Row", bound=SQLModel)

CACHED_PAYLOAD_CHARS = 64_000  # content-addressed payloads never change: small ones are cached


class ViewReader:
    """The read engine and the payload cache. Views extend it, each initialising its own
    caches after ``super().__init__`` so that ``store.views.queries.StoreQueries`` can compose
    them into one object."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._payloads: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        # Table models built by ``_rows`` (model_construct) need their mappers configured,
        # which otherwise happens at the process's first ORM query.
        configure_mappers()

    def _all(self, statement: Any) -> list[Any]:
        with Session(self.engine) as session:
            return list(session.exec(statement).all())

    def _rows(self, model: type[Row], statement: Any, params: dict[str, Any]) -> list[Row]:
        """A cached Core statement's rows as table models: the hot per-cycle reads skip the ORM
        session, which costs more than the query, and validation (the database typed them;
        constructing a table model validated costs 60 µs a row)."""
        with self.engine.connect() as conn:
            return [
                model.model_construct(**row) for row in conn.execute(statement, params).mappings()
            ]

    def payload(self, digest: str) -> Any:
        with self._lock:
            if digest in self._payloads:
                self._payloads.move_to_end(digest)
                return copy.deepcopy(self._payloads[digest])
        with self.engine.connect() as conn:
            value = payload_store.get(conn, digest)
        if len(str(value)) <= CACHED_PAYLOAD_CHARS:
            with self._lock:
                self._payloads[digest] = copy.deepcopy(value)
                while len(self._payloads) > 4096:
                    self._payloads.popitem(last=False)
        return value
