"""Credentials out of every text that leaves the process.

A model endpoint may echo a request's credentials in an error body ("invalid header
Authorization: Bearer sk-…"); that text becomes an attempt's error, the lineage's
``last_error``, a span, a log line and the workflow history. Error texts are redacted where
they are made: the configured keys by value — as they are, and as an endpoint might echo them
encoded: base64 (standard or URL-safe, alone or inside a longer encoded value such as a Basic
credential), percent-encoded, hex, or with characters spaced apart — and anything shaped like a
bearer token or an API key by pattern.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from functools import lru_cache
from urllib.parse import quote, quote_plus

MASK = "[redacted]"
_SHAPES = re.compile(
    r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"  # Authorization: Bearer …
    r"|\b(?:sk|pk|rk)-(?:ant-)?[A-Za-z0-9_-]{8,}"  # sk-…, sk-ant-… keys
    r"|\b(x-api-key|api[_-]?key|access[_-]?token|secret|password)(\"?\s*[:=]\s*\"?)"
    r"[^\s\"',;}]{6,}"
)


MIN_SECRET = 6
MIN_ENCODED_CORE = 8  # a shorter piece of an encoding would mask innocent text
_BASE64_RUN = r"[A-Za-z0-9+/_-]*"


@lru_cache(maxsize=64)
def _encodings(secret: str) -> re.Pattern[str]:
    """Every way ``secret`` is looked for: the forms it may be echoed in."""
    raw = secret.encode("utf-8")
    literal = {secret, quote(secret, safe=""), quote_plus(secret), raw.hex()}
    parts = [re.escape(form) for form in sorted(literal, key=len, reverse=True)]
    # characters spaced or punctuated apart: "s k - a n t …"
    parts.append(r"[\s._:|/-]{0,3}".join(re.escape(c) for c in secret))
    # base64 at each of the three alignments the secret may sit at inside an encoded value:
    # the characters that depend on the secret alone, and the rest of the encoded run
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            encoded = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            core = encoded[(offset * 4 + 2) // 3 : len(encoded) - 3]
            if len(core) >= MIN_ENCODED_CORE:
                parts.append(f"{_BASE64_RUN}{re.escape(core)}{_BASE64_RUN}=*")
    return re.compile("|".join(parts), re.IGNORECASE)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every configured secret (in the forms it may be echoed in) and every
    credential-shaped token masked."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET:
            text = _encodings(secret).sub(MASK, text)

    def mask(match: re.Match[str]) -> str:
        if match.group(1):  # keep the scheme: "Bearer [redacted]"
            return f"{match.group(1)} {MASK}"
        if match.group(2):  # keep the field name: "x-api-key: [redacted]"
            return f"{match.group(2)}{match.group(3)}{MASK}"
        return MASK

    return _SHAPES.sub(mask, text)
