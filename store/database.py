"""Engine creation: SQLite (WAL) by default, any SQLAlchemy URL from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlmodel import SQLModel

from store import tables  # noqa: F401  (registers the tables on SQLModel.metadata)

DEFAULT_DATABASE_URL = "sqlite:///.training-camp/training-camp.db"
# A new SQLite database gets 2 KiB pages (an existing one keeps its own). A committed write
# costs one WAL frame per page it touches, a whole page each (about twelve for a span: the
# event, its indexes, the blob, the span row...), so smaller pages make small transactions
# cheaper: one span per transaction ran about a fifth faster than with the 4 KiB default.
SQLITE_PAGE_SIZE = 2048


def database_url_from_env() -> str:
    return os.environ.get("TRAINING_CAMP_DATABASE_URL", DEFAULT_DATABASE_URL)


def sqlite_file(engine: Engine) -> str | None:
    """The database file of a SQLite engine; None for other databases and in-memory ones."""
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:":
        return None
    return path


def create_store_engine(url: str, readonly: bool = False) -> Engine:
    """An engine for ``url``. On SQLite, ``readonly`` engines begin deferred transactions: in
    WAL mode readers never wait for the writer, which takes the lock up front."""
    if url.startswith("sqlite"):
        return _sqlite_engine(url, readonly)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10)


def _sqlite_engine(url: str, readonly: bool = False) -> Engine:
    path = url.split("///", 1)[1] if "///" in url else ""
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # We issue BEGIN ourselves (below) so writers take the lock up front instead of
        # failing with "database is locked" when upgrading a read transaction.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")  # before WAL creates the file
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        # Checkpoint every 10,000 pages of WAL (20 MB at 2 KiB pages) rather than 1,000: each
        # checkpoint syncs the WAL and the database file, and at the default the checkpoints
        # cost as much as the commits themselves.
        cur.execute("PRAGMA wal_autocheckpoint=10000")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


def create_schema(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine)
