"""How a refusal quotes what it refuses, and how long it may be (docs/reliability.md promises
both): a reason is under ``MAX_REASON_CHARS`` characters and quotes at most ``EXCERPT_CHARS``
characters of the bad input, once, with its size when it was cut. Every reason that quotes an
input quotes it through ``excerpt``; every reason said back or recorded passes ``bounded``.
"""

from __future__ import annotations

from typing import Any

# How much of a bad input a rejection quotes: enough to recognise it, never the input itself
EXCERPT_CHARS = 80
# A reason is shorter than this: one line a person reads, whatever was sent
MAX_REASON_CHARS = 400
# Collections quoted by their size rather than their items from this many items
_MANY_ITEMS = 50


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quotation of a value: at most ``limit`` characters of it (of its
    ``repr``, so that a run of escaped control characters is no longer than plain text), with
    the value's size when it was cut."""
    if isinstance(value, str):
        head = value[:limit]
        text, cut = repr(head), len(head) < len(value)
        if len(text) > limit + 2:  # escapes: the quotation is bounded, not the characters
            text, cut = text[: limit + 1], True
        return f"{text}… ({len(value):,} characters)" if cut else text
    if isinstance(value, (dict, list)) and len(value) >= _MANY_ITEMS:
        return f"{type(value).__name__} of {len(value):,} items"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def bounded(reason: str, limit: int = MAX_REASON_CHARS) -> str:
    """``reason`` within the bound: cut, marked so, when its parts together run past it."""
    return reason if len(reason) < limit else reason[: limit - 2] + "…"
