"""Credentials out of every text that leaves the process, and out of every text people send
(a key pasted into a comment is masked before it is stored, carried or said back).

A model endpoint may echo a request's credentials in an error body ("invalid header
Authorization: Bearer sk-…"); that text becomes an attempt's error, the lineage's
``last_error``, a span, a log line and the workflow history. Error texts are redacted where
they are made: the configured keys by value — as they are, and as an endpoint might echo them
encoded: base64 (standard or URL-safe, alone or inside a longer encoded value such as a Basic
credential), hex, or with characters spaced apart — and anything shaped like a bearer token or
an API key by pattern. Both are looked for in the text as it is and as decoded — percent-
encoding of any character (``%73%6B%2D…``), HTML character references, ``\\u``/``\\x``
escapes, each up to three layers deep and mixed freely — and a match masks the encoded text it
came from.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Callable, Iterable
from functools import lru_cache

MASK = "[redacted]"
_SHAPES = re.compile(
    # Authorization: Bearer …; a token has a digit or a capital past its first character
    # (people's text passes through here too: "a basic introduction." is no token)
    r"\b((?i:bearer|basic))\s+(?=.[a-z._~+/=-]*[A-Z0-9])[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:\b(?:sk|pk|rk)-(?:ant-)?[A-Za-z0-9_-]{8,})"  # sk-…, sk-ant-… keys
    r"|\b((?i:x-api-key|api[_-]?key|access[_-]?token|secret|password))(\"?\s*[:=]\s*\"?)"
    r"[^\s\"',;}]{6,}"
)


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


# What an endpoint may have encoded a text with: runs of percent-encoded bytes (UTF-8), HTML
# character references, JSON's and Python's escapes
_ENCODED = re.compile(
    r"(?:%[0-9A-Fa-f]{2})+"
    r"|&(?:#[xX][0-9A-Fa-f]{1,6}|#[0-9]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});"
    r"|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}"
)
DECODE_ROUNDS = 3  # "%2573" is "%73" once decoded, "s" twice
# a pass masks what the first view with a match holds; the next looks again
_MAX_PASSES = 8


def _utf8_length(lead: int) -> int:
    return 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4


def _decode_token(token: str) -> list[tuple[str, int, int]]:
    """The characters an encoded token stands for, each with the span of the token it came
    from; a token that decodes to nothing valid stands for itself."""
    if token[0] == "%":
        data = bytes.fromhex(token.replace("%", ""))
        pieces, i = [], 0
        while i < len(data):
            length = _utf8_length(data[i])
            try:
                pieces.append((data[i : i + length].decode("utf-8"), 3 * i, 3 * (i + length)))
                i += length
            except UnicodeDecodeError:  # not UTF-8: the three characters as written
                pieces += [
                    (c, 3 * i + k, 3 * i + k + 1) for k, c in enumerate(token[3 * i : 3 * i + 3])
                ]
                i += 1
        return pieces
    # an HTML reference, or \uXXXX or \xXX
    decoded = html.unescape(token) if token[0] == "&" else chr(int(token[2:], 16))
    if decoded == token:
        return [(c, k, k + 1) for k, c in enumerate(token)]
    return [(c, 0, len(token)) for c in decoded]


def _decoded(text: str, starts: list[int], ends: list[int]) -> tuple[str, list[int], list[int]]:
    """``text`` with one layer of encoding decoded; each character of it carries the span
    (start, end) of the original text it came from."""
    chars: list[str] = []
    new_starts: list[int] = []
    new_ends: list[int] = []
    position = 0
    for match in _ENCODED.finditer(text):
        chars.append(text[position : match.start()])
        new_starts += starts[position : match.start()]
        new_ends += ends[position : match.start()]
        for char, first, last in _decode_token(match.group()):
            chars.append(char)
            new_starts.append(starts[match.start() + first])
            new_ends.append(ends[match.start() + last - 1])
        position = match.end()
    chars.append(text[position:])
    new_starts += starts[position:]
    new_ends += ends[position:]
    return "".join(chars), new_starts, new_ends


Replacement = Callable[[re.Match[str]], str]


def _found(pattern: re.Pattern[str], text: str, replace: Replacement) -> list[tuple[int, int, str]]:
    """Where ``pattern`` matches ``text`` as it is or, failing that, decoded one layer more
    each time: spans of ``text`` and what to put there."""
    view, starts, ends = text, list(range(len(text))), list(range(1, len(text) + 1))
    for _ in range(DECODE_ROUNDS + 1):
        found = [
            (start, end, replacement)
            for m in pattern.finditer(view)
            if m.end() > m.start()
            for start, end, replacement in [(starts[m.start()], ends[m.end() - 1], replace(m))]
            if text[start:end] != replacement  # masked already ("x-api-key: [redacted]")
        ]
        if found or not _ENCODED.search(view):
            return found
        view, starts, ends = _decoded(view, starts, ends)
    return []


def _masked(pattern: re.Pattern[str], text: str, replace: Replacement) -> str:
    for _ in range(_MAX_PASSES):
        found = _found(pattern, text, replace)
        if not found:
            break
        pieces, position = [], 0
        for start, end, replacement in sorted(found):
            if start >= position:  # matches in a decoded view may overlap in the original
                pieces += [text[position:start], replacement]
                position = end
        text = "".join(pieces) + text[position:]
    return text


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every configured secret (in the forms it may be echoed in) and every
    credential-shaped token masked."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET:
            text = _masked(_encodings(secret), text, lambda _: MASK)

    def mask(match: re.Match[str]) -> str:
        if match.group(1):  # keep the scheme: "Bearer [redacted]"
            return f"{match.group(1)} {MASK}"
        if match.group(2):  # keep the field name: "x-api-key: [redacted]"
            return f"{match.group(2)}{match.group(3)}{MASK}"
        return MASK

    return _masked(_SHAPES, text, mask)
