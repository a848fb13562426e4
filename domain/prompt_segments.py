"""Split a system prompt into instruction segments, keeping each segment's exact text."""

from __future__ import annotations

import re

_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")


def segments(prompt: str) -> list[str]:
    return [s.strip() for s in _BOUNDARY.split(prompt) if s and s.strip()]
