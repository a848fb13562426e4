"""Engine creation: SQLite (WAL) by default, any SQLAlchemy URL from the environment."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Pool, create_engine, event
from sqlmodel import SQLModel

from domain.settings import DEFAULT_DATABASE_URL
from store import tables  # noqa: F401  (registers the tables on SQLModel.metadata)

# A new SQLite database gets 2 KiB pages (an existing one keeps its own). A committed write
# costs one WAL frame per page it touches, a whole page each (about twelve for a span: the
# event, its indexes, the blob, the span row...), so smaller pages make small transactions
# cheaper: one span per transaction ran about a fifth faster than with the 4 KiB default.
SQLITE_PAGE_SIZE = 2048
# How long a writer waits for SQLite's write lock (the busy timeout), or for its turn among
# this process's writers, before the write fails and its activity retries.
WRITE_WAIT_SECONDS = 30


def database_url_from_env() -> str:
    return os.environ.get("TRAINING_CAMP_DATABASE_URL", DEFAULT_DATABASE_URL)  # as Settings


def sqlite_file(engine: Engine) -> str | None:
    """The database file of a SQLite engine; None for other databases and in-memory ones."""
    path = engine.url.database
    if engine.dialect.name != "sqlite" or not path or path == ":memory:":
        return None
    return path


@contextmanager
def exclusive_writer(engine: Engine, lock: threading.Lock) -> Iterator[None]:
    """This process's turn to write to the engine's SQLite file (``lock``, from
    ``sqlite_writer_lock``).

    SQLite admits one writer at a time, and a writer that finds the lock taken sleeps in the
    busy handler, 1, 2, 5, 10 ... 100 ms between tries, so it sleeps on after the lock is free:
    with 20 lineages' steps writing, four in ten write transactions waited over 2 ms for a
    lock held for a fraction of that, and a cycle's steps, one after the other, queued behind
    those sleeps. Writers in one process take turns on a lock instead, and the next one starts
    the moment the last one commits. Other processes on the file still meet the busy handler.
    """
    if not lock.acquire(timeout=WRITE_WAIT_SECONDS):
        raise TimeoutError(f"no turn to write to {engine.url.database} in {WRITE_WAIT_SECONDS} s")
    try:
        yield
    finally:
        lock.release()


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """``engine.begin()`` for a transaction that writes, in this process's turn on SQLite.

    On a SQLite file the turn's holder writes on one connection kept for the engine's writes:
    checking a connection out of the pool and back in cost a one-statement transaction as much
    as the statement and its commit. A write that fails leaves it for a new one."""
    lock = sqlite_writer_lock(engine)
    if lock is None:
        with engine.begin() as conn:
            yield conn
        return
    with exclusive_writer(engine, lock):
        pool, conn = _writer_connections.get(engine, (None, None))
        if conn is None or pool is not engine.pool or conn.closed or conn.invalidated:
            # none yet, or the engine was disposed since (a new pool, maybe new settings)
            _close_writer_connection(engine)
            conn = engine.connect()
            _writer_connections[engine] = (engine.pool, conn)
        try:
            with conn.begin():
                yield conn
        except BaseException:
            _close_writer_connection(engine)
            raise


# Each engine's kept write connection, used only in the holder's turn (``write_transaction``).
_writer_connections: weakref.WeakKeyDictionary[Engine, tuple[Pool, Connection]] = (
    weakref.WeakKeyDictionary()
)


def _close_writer_connection(engine: Engine) -> None:
    _, conn = _writer_connections.pop(engine, (None, None))
    if conn is not None:
        with contextlib.suppress(Exception):  # a dead connection: nothing to give back
            conn.close()


def close_writer_connection(engine: Engine) -> None:
    """Give the engine's kept write connection back (before the engine is disposed)."""
    lock = sqlite_writer_lock(engine)
    if lock is None:
        return
    with lock:
        _close_writer_connection(engine)


def sqlite_writer_lock(engine: Engine) -> threading.Lock | None:
    """The lock behind ``exclusive_writer`` (None for other databases), for a writer that
    keeps it at hand (the span writer takes it for every streamed span)."""
    path = sqlite_file(engine)
    return None if path is None else _writer_lock(path)


@functools.cache
def _writer_lock(path: str) -> threading.Lock:
    return _file_lock(os.path.realpath(path))  # resolved once per path as given


@functools.cache
def _file_lock(real_path: str) -> threading.Lock:
    return threading.Lock()  # one per database file, whatever engine or Store opened it


def create_store_engine(url: str, readonly: bool = False) -> Engine:
    """An engine for ``url``. On SQLite, ``readonly`` engines begin deferred transactions: in
    WAL mode readers never wait for the writer, which takes the lock up front."""
    if url.startswith("sqlite"):
        return _sqlite_engine(url, readonly)
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=10)


SYNCHRONOUS_LEVELS = ("NORMAL", "FULL")


def _sqlite_engine(url: str, readonly: bool = False) -> Engine:
    url, synchronous = _synchronous(url)
    path = url.split("///", 1)[1] if "///" in url else ""
    if path and path != ":memory:":
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url, connect_args={"check_same_thread": False, "timeout": WRITE_WAIT_SECONDS}
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # We issue BEGIN ourselves (below) so writers take the lock up front instead of
        # failing with "database is locked" when upgrading a read transaction.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")  # before WAL creates the file
        cur.execute("PRAGMA journal_mode=WAL")
        # NORMAL (the default): a commit survives the process crashing, not the machine losing
        # power; FULL (``?synchronous=full`` on the URL) syncs the WAL at every commit.
        cur.execute(f"PRAGMA synchronous={synchronous}")
        # Checkpoint every 10,000 pages of WAL (20 MB at 2 KiB pages) rather than 1,000: each
        # checkpoint syncs the WAL and the database file, and at the default the checkpoints
        # cost as much as the commits themselves.
        cur.execute("PRAGMA wal_autocheckpoint=10000")
        cur.execute(f"PRAGMA busy_timeout={WRITE_WAIT_SECONDS * 1000}")
        cur.close()

    begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:  # type: ignore[no-untyped-def]
        # On the driver's connection: through SQLAlchemy's execution path this one statement
        # cost a write transaction a third of its overhead.
        conn.connection.driver_connection.execute(begin)

    return engine


def _synchronous(url: str) -> tuple[str, str]:
    """The URL without its ``synchronous`` parameter, and the level it asks for."""
    base, _, query = url.partition("?")
    params = [p for p in query.split("&") if p]
    level = "NORMAL"
    kept = []
    for param in params:
        key, _, value = param.partition("=")
        if key == "synchronous":
            level = value.upper()
            if level not in SYNCHRONOUS_LEVELS:
                raise ValueError(
                    f"synchronous={value!r} in the database URL: use one of "
                    f"{', '.join(v.lower() for v in SYNCHRONOUS_LEVELS)}"
                )
        else:
            kept.append(param)
    return base + ("?" + "&".join(kept) if kept else ""), level


def create_schema(engine: Engine) -> None:
    SQLModel.metadata.create_all(engine)


class SqliteWriter:
    """One SQLite connection kept for streaming writes, used in this process's turn to write
    (hold ``lock``, the one ``exclusive_writer`` takes). SQLite admits one writer at a time
    anyway; a pooled connection checked out and back in for every span cost a fifth of the
    write. Opened at the first write."""

    def __init__(self, engine: Engine, lock: threading.Lock) -> None:
        self.engine = engine
        self.lock = lock
        self._connection: Any = None

    @classmethod
    def for_engine(cls, engine: Engine) -> SqliteWriter | None:
        # An in-memory database is one connection's: stay on the pool.
        lock = sqlite_writer_lock(engine)
        return cls(engine, lock) if lock is not None else None

    def connection(self) -> Any:
        if self._connection is None:
            fairy = self.engine.raw_connection()  # made by the engine: its PRAGMAs applied
            fairy.detach()  # ours from now on, not the pool's
            self._connection = fairy.dbapi_connection
        return self._connection

    def close(self) -> None:
        with self.lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
