"""Credentials out of every text that leaves the process, and out of every text people send
(a key pasted into a comment is masked before it is stored, carried or said back).

A model endpoint may echo a request's credentials in an error body ("invalid header
Authorization: Bearer sk-…"); that text becomes an attempt's error, the lineage's
``last_error``, a span, a log line and the workflow history. Error texts are redacted where
they are made: the configured keys by value — as they are, and as an endpoint might echo them
encoded: base64 (standard or URL-safe, alone or inside a longer encoded value such as a Basic
credential), hex, or with characters spaced apart — and every credential
``domain.credentials`` finds (detect-secrets' kinds and the shapes it lacks). Both are looked
for in every view of the text ``domain.text_views`` makes: as written, without invisible
characters, with a key's pieces split by whitespace joined, decoded — percent-encoding of any
character (``%73%6B%2D…``), HTML character references, ``\\u``/``\\x`` escapes, each up to
three layers deep and mixed freely, and base64 that decodes to text — and a match masks the
text as written it came from (an encoded key: all of its encoding).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache

from domain import credentials
from domain.credentials import Found
from domain.text_views import View, views

MASK = "[redacted]"
# a pass masks what every view holds; the next looks again (a mask may uncover a layer)
_MAX_PASSES = 4


MIN_SECRET = 6
MIN_ENCODED_CORE = 8  # a shorter piece of an encoding would mask innocent text
_BASE64_RUN = r"[A-Za-z0-9+/_-]*"


@lru_cache(maxsize=64)
def _encodings(secret: str) -> re.Pattern[str]:
    """Every way ``secret`` is looked for: the forms it may be echoed in."""
    raw = secret.encode("utf-8")
    # percent-encoded and escaped forms are found in the decoded text (see _decoded)
    literal = {secret, raw.hex()}
    parts = [re.escape(form) for form in sorted(literal, key=len, reverse=True)]
    # characters spaced or punctuated apart: "s k - a n t …" (or "s+k+-+a…", form-encoded)
    parts.append(r"[\s._:|/+-]{0,3}".join(re.escape(c) for c in secret))
    # base64 at each of the three alignments the secret may sit at inside an encoded value:
    # the characters that depend on the secret alone, and the rest of the encoded run
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        for offset in range(3):
            encoded = encode(b"\0" * offset + raw).decode("ascii").rstrip("=")
            core = encoded[(offset * 4 + 2) // 3 : len(encoded) - 3]
            if len(core) >= MIN_ENCODED_CORE:
                parts.append(f"{_BASE64_RUN}{re.escape(core)}{_BASE64_RUN}=*")
    return re.compile("|".join(parts), re.IGNORECASE)


def _found(pattern: re.Pattern[str], view: View) -> Iterator[Found]:
    for m in pattern.finditer(view.text):
        if m.end() > m.start():
            yield Found(m.start(), m.end())


def _spans(text: str, find: Callable[[View], Iterable[Found]]) -> list[tuple[int, int, str]]:
    """Where ``find`` finds something in any view of ``text``: spans of ``text`` and what to
    put there."""
    spans = []
    for view in views(text):
        for found in find(view):
            start, end = view.span(found.start, found.end)
            replacement = f"{found.keep}{MASK}"
            if text[start:end] != replacement:  # masked already ("x-api-key: [redacted]")
                spans.append((start, end, replacement))
    return spans


def _masked(text: str, find: Callable[[View], Iterable[Found]]) -> str:
    for _ in range(_MAX_PASSES):
        found = _spans(text, find)
        if not found:
            break
        pieces, position = [], 0
        for start, end, replacement in sorted(found):
            if start >= position:  # one credential, found in several views
                pieces += [text[position:start], replacement]
                position = end
            elif end > position:  # overlapping: the mask reaches to the end of both
                position = end
        text = "".join(pieces) + text[position:]
    return text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every configured secret (in the forms it may be echoed in) and every
    credential (``domain.credentials``) masked, as written and in every view of it
    (``domain.text_views``: invisible characters dropped, split keys joined, decoded)."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET:
            pattern = _encodings(secret)
            text = _masked(text, lambda view, pattern=pattern: _found(pattern, view))
    return _masked(text, lambda view: credentials.find(view.text))
