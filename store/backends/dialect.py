"""SQL for every backend we support (SQLite and PostgreSQL): insert-or-ignore statements, and
SQL text for the hot paths that run on the driver's own cursor."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite

_cache: dict[tuple[str, str, tuple[str, ...]], Any] = {}


def insert_ignore(conn: Connection, table: Table, keys: list[str]):  # type: ignore[no-untyped-def]
    """INSERT … ON CONFLICT DO NOTHING, built once per table: pass the rows at execute time
    (building a statement per row with .values() costs more than running it)."""
    key = (conn.dialect.name, table.name, tuple(keys))
    stmt = _cache.get(key)
    if stmt is None:
        if conn.dialect.name == "postgresql":
            stmt = postgresql.insert(table).on_conflict_do_nothing(index_elements=keys)
        elif conn.dialect.name == "sqlite":
            stmt = sqlite.insert(table).on_conflict_do_nothing(index_elements=keys)
        else:
            raise RuntimeError(f"unsupported database dialect {conn.dialect.name!r}")
        _cache[key] = stmt
    return stmt


class DriverSQL:
    """One statement as SQL text for the driver's own cursor, on the hot write paths (the event
    log, payload blobs, span rows): SQLAlchemy's per-statement work costs more than SQLite's.
    Written with ``?`` placeholders and ``ON CONFLICT DO NOTHING`` (which both SQLite and
    PostgreSQL accept); ``postgresql_suffix`` adds what only PostgreSQL needs (``FOR UPDATE``)."""

    def __init__(self, sql: str, postgresql_suffix: str = "") -> None:
        self._text = {"sqlite": sql, "postgresql": sql.replace("?", "%s") + postgresql_suffix}

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
    driver = conn.connection.driver_connection  # type: ignore[union-attr]
    if dialect == "postgresql":
        cur = driver.cursor(name=f"stream_{uuid.uuid4().hex}")  # type: ignore[union-attr]
    else:
        cur = driver.cursor()  # type: ignore[union-attr]
    try:
        cur.execute(sql.text(dialect), params)
        while rows := cur.fetchmany(size):
            yield from rows
    finally:
        cur.close()
