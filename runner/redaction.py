"""Credentials out of every text that leaves the process.

A model endpoint may echo a request's credentials in an error body ("invalid header
Authorization: Bearer sk-…"); that text becomes an attempt's error, the lineage's
``last_error``, a span, a log line and the workflow history. Error texts are redacted where
they are made: the configured keys by value, and anything shaped like a bearer token or an API
key by pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[redacted]"
_SHAPES = re.compile(
    r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"  # Authorization: Bearer …
    r"|\b(?:sk|pk|rk)-(?:ant-)?[A-Za-z0-9_-]{8,}"  # sk-…, sk-ant-… keys
    r"|\b(x-api-key|api[_-]?key|access[_-]?token|secret|password)(\"?\s*[:=]\s*\"?)"
    r"[^\s\"',;}]{6,}"
)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every configured secret and every credential-shaped token masked."""
    for secret in secrets:
        if secret and len(secret) >= 6:
            text = text.replace(secret, MASK)

    def mask(match: re.Match[str]) -> str:
        if match.group(1):  # keep the scheme: "Bearer [redacted]"
            return f"{match.group(1)} {MASK}"
        if match.group(2):  # keep the field name: "x-api-key: [redacted]"
            return f"{match.group(2)}{match.group(3)}{MASK}"
        return MASK

    return _SHAPES.sub(mask, text)
