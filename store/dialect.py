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
