"""How large a value is as it crosses Temporal: the JSON bytes the pydantic data converter
sends. Collections that cross Temporal are sized with this against the 2 MB payload limit."""

from __future__ import annotations

from typing import Any

import pydantic_core

# Temporal refuses a payload over 2 MB (the call fails, and a retried one fails again)
PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024


def json_size(value: Any) -> int:
    """The value's size in bytes as the data converter encodes it (UTF-8 JSON)."""
    return len(pydantic_core.to_json(value))
