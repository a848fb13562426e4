"""Insert-or-ignore for every backend we support (SQLite and PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_ignore(conn: Connection, table: Table, keys: list[str]):  # type: ignore[no-untyped-def]
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=keys)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=keys)
    raise RuntimeError(f"unsupported database dialect {conn.dialect.name!r}")
