"""What differs between the databases the store runs on (SQLite and PostgreSQL), behind one
interface: ``Backend``, one instance per database, found by ``backend(name)`` or
``backend_of(conn)``. Code outside ``store/backends`` asks the backend for the SQL or the
behaviour it needs and never compares dialect names. Also here: insert-or-ignore statements,
and SQL text for the hot paths that run on the driver's own cursor."""

from __future__ import annotations

import operator
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.dialects import postgresql, sqlite


class Backend(ABC):
    """One database's SQL and behaviour where they differ."""

    name: ClassVar[str]
    # One write transaction at a time (SQLite's write lock): a writer that reads to decide
    # needs no row locks of its own.
    serialises_writes: ClassVar[bool]
    # Readers get an engine of their own (SQLite WAL: read transactions never take the
    # write lock), rather than sharing the writers' pool.
    separate_read_engine: ClassVar[bool]
    # Appended to a SELECT that must lock the rows it reads until the transaction ends.
    lock_rows_suffix: ClassVar[str]
    # Appended to a text comparison to compare by code point, as Python sorts strings.
    bytewise: ClassVar[str]

    def driver_text(self, sql: str) -> str:
        """``sql``, written with ``?`` placeholders, for the driver's own cursor."""
        return sql

    @abstractmethod
    def insert(self, table: Table) -> Any:
        """The dialect's INSERT (which knows ON CONFLICT)."""

    def begin_on_driver(self, cursor: Any) -> None:  # noqa: B027 (most drivers need nothing)
        """Open a write transaction on a driver connection outside SQLAlchemy."""

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` is one of ``values``: the SQL condition and its parameters."""
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def lock_key(self, cursor: Any, key: str) -> None:  # noqa: B027 (SQLite: nothing to do)
        """Take a lock named ``key`` until the transaction ends: writers that count before
        they write, one at a time (SQLite's write lock, taken at BEGIN, does it already)."""

    @abstractmethod
    def json_text(self, column: str, key: str) -> str:
        """A top-level field of the JSON text in ``column``, as text."""

    def as_float(self, expression: str) -> str:
        """``expression`` (text holding a number) as a floating-point number."""
        return expression

    def streaming_cursor(self, driver_connection: Any) -> Any:
        """A cursor whose ``fetchmany`` does not hold the whole result in memory."""
        return driver_connection.cursor()


class SQLiteBackend(Backend):
    name = "sqlite"
    serialises_writes = True
    separate_read_engine = True
    lock_rows_suffix = ""  # the write lock, taken at BEGIN IMMEDIATE, covers every row
    bytewise = ""  # SQLite compares text by bytes already

    def insert(self, table: Table) -> Any:
        return sqlite.insert(table)

    def begin_on_driver(self, cursor: Any) -> None:
        cursor.execute("BEGIN IMMEDIATE")  # an autocommit driver: we open the transaction

    def json_text(self, column: str, key: str) -> str:
        return f"json_extract({column}, '$.{key}')"


class PostgreSQLBackend(Backend):
    name = "postgresql"
    serialises_writes = False
    separate_read_engine = False
    lock_rows_suffix = " FOR UPDATE"
    bytewise = ' COLLATE "C"'

    def driver_text(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def insert(self, table: Table) -> Any:
        return postgresql.insert(table)

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        # one array parameter: the statement's text stays the same whatever the count
        return f"{column} = ANY(?)", [list(values)]

    def json_text(self, column: str, key: str) -> str:
        return f"({column}::json ->> '{key}')"

    def lock_key(self, cursor: Any, key: str) -> None:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))

    def as_float(self, expression: str) -> str:
        return f"CAST({expression} AS DOUBLE PRECISION)"

    def streaming_cursor(self, driver_connection: Any) -> Any:
        return driver_connection.cursor(name=f"stream_{uuid.uuid4().hex}")  # server-side


BACKENDS: dict[str, Backend] = {b.name: b for b in (SQLiteBackend(), PostgreSQLBackend())}


def backend(name: str) -> Backend:
    try:
        return BACKENDS[name]
    except KeyError:
        raise RuntimeError(f"unsupported database dialect {name!r}") from None


def backend_of(bind: Connection | Engine) -> Backend:
    return backend(bind.dialect.name)


_cache: dict[tuple[str, str, tuple[str, ...]], Any] = {}


def insert_ignore(conn: Connection, table: Table, keys: list[str]):  # type: ignore[no-untyped-def]
    """INSERT … ON CONFLICT DO NOTHING, built once per table: pass the rows at execute time
    (building a statement per row with .values() costs more than running it)."""
    key = (conn.dialect.name, table.name, tuple(keys))
    stmt = _cache.get(key)
    if stmt is None:
        stmt = backend_of(conn).insert(table).on_conflict_do_nothing(index_elements=keys)
        _cache[key] = stmt
    return stmt


class DriverSQL:
    """One statement as SQL text for the driver's own cursor, on the hot write paths (the event
    log, payload blobs, span rows): SQLAlchemy's per-statement work costs more than SQLite's.
    Written with ``?`` placeholders and ``ON CONFLICT DO NOTHING`` (which both SQLite and
    PostgreSQL accept); ``lock_rows`` locks the rows a SELECT reads (``FOR UPDATE``)."""

    def __init__(self, sql: str, lock_rows: bool = False) -> None:
        self._text = {
            name: b.driver_text(sql + (b.lock_rows_suffix if lock_rows else ""))
            for name, b in BACKENDS.items()
        }

    def text(self, dialect: str) -> str:
        try:
            return self._text[dialect]
        except KeyError:
            raise RuntimeError(f"unsupported database dialect {dialect!r}") from None


def execute_rows(cur: Any, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Run ``sql`` for each row: one row with ``execute`` (streamed writes, where executemany's
    set-up costs more than the row), several with ``executemany``."""
    if len(rows) == 1:
        cur.execute(sql, rows[0])
    elif rows:
        cur.executemany(sql, rows)


def driver_cursor(conn: Connection) -> tuple[Any, str]:
    """The DBAPI cursor of ``conn``'s connection (inside its transaction), and the dialect."""
    return conn.connection.driver_connection.cursor(), conn.dialect.name  # type: ignore[union-attr]


class TableInsert:
    """INSERT of every column of ``table`` … ON CONFLICT DO NOTHING (on ``conflict`` when
    given), as driver SQL. Rows are dicts; a column a row leaves out gets the model's scalar
    default, or NULL, as SQLAlchemy would have given it."""

    def __init__(self, table: Table, conflict: str | None = None) -> None:
        self.names = [c.name for c in table.columns]
        self.defaults = {
            c.name: c.default.arg
            for c in table.columns
            if c.default is not None and c.default.is_scalar  # type: ignore[attr-defined]
        }
        # A row that names every column becomes its parameters in one C call.
        getter = operator.itemgetter(*self.names)
        self._complete = getter if len(self.names) > 1 else lambda row: (getter(row),)
        quoted = ", ".join(f'"{name}"' for name in self.names)
        target = f" ({conflict})" if conflict else ""
        self.sql = DriverSQL(
            f"INSERT INTO {table.name} ({quoted}) VALUES ({', '.join('?' * len(self.names))})"
            f" ON CONFLICT{target} DO NOTHING"
        )

    def params(self, row: dict[str, Any]) -> Sequence[Any]:
        try:
            return self._complete(row)  # type: ignore[no-any-return]
        except KeyError:
            return [row[n] if n in row else self.defaults.get(n) for n in self.names]

    def run(self, conn: Connection, rows: list[dict[str, Any]]) -> int:
        """Insert ``rows`` in one executemany; returns how many were new."""
        if not rows:
            return 0
        cur, dialect = driver_cursor(conn)
        cur.executemany(self.sql.text(dialect), [self.params(row) for row in rows])
        return max(cur.rowcount, 0)


def stream_rows(
    conn: Connection, sql: DriverSQL, params: list[Any], size: int = 2000
) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` as driver tuples, fetched ``size`` at a time: on PostgreSQL through a
    server-side cursor (inside ``conn``'s transaction), so a large result never sits in memory."""
    dialect = conn.dialect.name
    cur = backend(dialect).streaming_cursor(conn.connection.driver_connection)
    try:
        cur.execute(sql.text(dialect), params)
        while rows := cur.fetchmany(size):
            yield from rows
    finally:
        cur.close()
