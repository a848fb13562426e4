"""Content-addressed payload blobs: same content, same SHA-256, stored once."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Connection, select

from domain.content_hash import canonical_json
from store.dialect import insert_ignore
from store.tables import PayloadBlob

_blobs = PayloadBlob.__table__  # type: ignore[attr-defined]


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


def put_encoded(conn: Connection, encoded: list[tuple[str, str]], now_ms: int) -> None:
    """Store already-encoded (hash, canonical JSON) pairs, each once."""
    rows: dict[str, dict[str, Any]] = {}
    for digest, text in encoded:
        rows[digest] = {
            "hash": digest,
            "content": text,
            "size": len(text.encode("utf-8")),
            "created_at": now_ms,
        }
    if rows:
        conn.execute(insert_ignore(conn, _blobs, ["hash"]), list(rows.values()))


def get(conn: Connection, digest: str) -> Any:
    row = conn.execute(select(_blobs.c.content).where(_blobs.c.hash == digest)).first()
    if row is None:
        raise KeyError(f"payload {digest} is not in the store")
    return json.loads(row[0])
