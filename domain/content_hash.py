"""Canonical JSON and SHA-256 content addresses, shared by agent hashes and the payload store."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# json.dumps with options builds a new encoder per call, which costs as much as encoding a
# small payload; one encoder, kept, writes the same text (it holds no state between calls).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """One byte-exact JSON text per value: sorted keys, no insignificant whitespace."""
    return _CANONICAL.encode(value)


def content_hash(value: Any) -> str:
    """SHA-256 hex of the canonical JSON of ``value`` (strings are hashed as JSON strings)."""
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()
