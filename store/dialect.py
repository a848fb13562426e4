"""Insert-or-ignore for every backend we support (SQLite and PostgreSQL)."""

from __future__ import annotations

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


def driver_cursor(conn: Connection) -> tuple[Any, str]:
    """The DBAPI cursor of ``conn``'s connection (inside its transaction), and the dialect."""
    return conn.connection.driver_connection.cursor(), conn.dialect.name  # type: ignore[union-attr]
