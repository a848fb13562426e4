"""The training-signal store: event log + payload blobs + projections (SQLModel).

Activities write through ``Store.recorder`` (the one write path) and read through
``Store.queries``. Workflow code never imports this package.
"""

from __future__ import annotations

from sqlalchemy import Engine

from store.backends.database import (
    close_writer_connection,
    create_store_engine,
    database_url_from_env,
    write_transaction,
)
from store.backends.dialect import backend_of
from store.backends.migrate import upgrade
from store.eventstore.chain_keys import UNKEYED, ChainKeys
from store.records import projections
from store.records.recorder import TrainingSignalRecorder
from store.views.queries import StoreQueries


class Store:
    def __init__(
        self, engine: Engine, read_engine: Engine | None = None, keys: ChainKeys = UNKEYED
    ) -> None:
        self.engine = engine
        self.read_engine = read_engine or engine
        self.keys = keys
        self.recorder = TrainingSignalRecorder(engine, keys)
        self.queries = StoreQueries(self.read_engine)

    @classmethod
    def open(cls, url: str | None = None, keys: ChainKeys | None = None) -> Store:
        """Connect and bring the schema to the current revision (Alembic migrations). The event
        log's chain is signed with ``keys``, by default those in the environment."""
        url = url or database_url_from_env()
        engine = create_store_engine(url)
        upgrade(engine)
        separate = backend_of(engine).separate_read_engine
        reader = create_store_engine(url, readonly=True) if separate else None
        return cls(engine, reader, keys if keys is not None else ChainKeys.from_env())

    def rebuild_projections(self) -> int:
        with write_transaction(self.engine) as conn:
            return projections.rebuild(conn)

    def close(self) -> None:
        self.recorder.close()
        close_writer_connection(self.engine)
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()


__all__ = ["Store"]
