"""How the offline model reads its instructions: whether a phrase is asked for, or negated
("not", "never", "instead of" just before it), and which of several was asked for last (the
trainer appends newer instructions after older ones)."""

from __future__ import annotations

import re

NEGATION = r"(?:not|no|never|avoid|without|instead of|rather than)\s+(?:\w+\s+){0,2}"


def negated(text: str, start: int) -> bool:
    """True when a negation ends just before ``start``."""
    return bool(re.search(NEGATION + r"$", text[max(0, start - 40) : start]))


def mentions(text: str, pattern: str) -> bool:
    """True when ``pattern`` occurs and at least one occurrence is not negated."""
    return any(not negated(text, m.start()) for m in re.finditer(pattern, text))


def last_mentioned(text: str, patterns: dict[str, str], default: str) -> str:
    """The name whose pattern has the latest occurrence that is not negated."""
    best, where = default, -1
    for name, pattern in patterns.items():
        for match in re.finditer(pattern, text):
            if not negated(text, match.start()) and match.start() > where:
                best, where = name, match.start()
    return best
