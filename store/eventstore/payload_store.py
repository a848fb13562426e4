"""Content-addressed payload blobs: same content, same SHA-256, stored once."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from domain.content_hash import canonical_json
from store.backends.dialect import DriverSQL, driver_cursor, execute_rows, insert_ignore
from store.tables import PayloadBlob

_blobs = PayloadBlob.__table__  # type: ignore[attr-defined]


Encoded = tuple[str, str]  # (content hash, canonical JSON)


def encode(content: Any) -> tuple[str, str]:
    import hashlib

    text = canonical_json(content)
    return hashlib.sha256(text.encode("utf-8")).hexdigest(), text


def put(conn: Connection, content: Any, now_ms: int) -> str:
    """Store ``content`` (any JSON value) if new; return its hash."""
    digest, text = encode(content)
    conn.execute(
        insert_ignore(conn, _blobs, ["hash"]),
        {"hash": digest, "content": text, "size": len(text.encode("utf-8")), "created_at": now_ms},
    )
    return digest


def put_many(conn: Connection, contents: list[Any], now_ms: int) -> list[str]:
    encoded = [encode(content) for content in contents]
    put_encoded(conn, encoded, now_ms)
    return [digest for digest, _ in encoded]


_INSERT = DriverSQL(
    "INSERT INTO payload_blobs (hash, content, size, created_at) VALUES (?, ?, ?, ?)"
    " ON CONFLICT DO NOTHING"
)


def put_encoded(conn: Connection, encoded: list[tuple[str, str]], now_ms: int) -> None:
    """Store already-encoded (hash, canonical JSON) pairs, each once."""
    put_encoded_with(*driver_cursor(conn), encoded, now_ms)


def put_encoded_with(cur: Any, dialect: str, encoded: list[tuple[str, str]], now_ms: int) -> None:
    """``put_encoded`` on a DBAPI cursor, inside the caller's transaction."""
    rows = {digest: (digest, text, len(text.encode("utf-8")), now_ms) for digest, text in encoded}
    execute_rows(cur, _INSERT.text(dialect), list(rows.values()))


def get(conn: Connection, digest: str) -> Any:
    row = conn.execute(select(_blobs.c.content).where(_blobs.c.hash == digest)).first()
    if row is None:
        raise KeyError(f"payload {digest} is not in the store")
    return json.loads(row[0])
