"""The views of a text a credential may hide in, each character mapped back to the span of the
original it came from (so what is found in a view masks the text as written).

A pasted key may be broken by a zero-width character or a space, percent-encoded, written as
HTML references or ``\\u`` escapes, or base64-encoded. The views undo each: zero-width and
other invisible format characters dropped; a key's pieces split by whitespace joined; one layer
of percent-encoding, HTML references and escapes decoded, up to three layers deep; a base64 run
decoded where it decodes to text. Every view is made by one linear scan of the one before.
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class View:
    """A text as read for credentials: ``starts[i]``/``ends[i]`` are the span of the original
    text character ``i`` came from."""

    text: str
    starts: Sequence[int]
    ends: Sequence[int]

    @classmethod
    def of(cls, text: str) -> View:
        return cls(text, range(len(text)), range(1, len(text) + 1))

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that ``text[start:end]`` came from."""
        return self.starts[start], self.ends[end - 1]


# invisible format characters: zero-width spaces and joiners, word joiner, BOM, soft hyphen,
# bidi controls — nothing a reader sees, and all a key needs to slip past a pattern
_UNSEEN = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]+")


def _without(view: View, pattern: re.Pattern[str]) -> View:
    """``view`` with what ``pattern`` matches taken out."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for match in pattern.finditer(view.text):
        chars.append(view.text[position : match.start()])
        starts += view.starts[position : match.start()]
        ends += view.ends[position : match.start()]
        position = match.end()
    chars.append(view.text[position:])
    starts += view.starts[position:]
    ends += view.ends[position:]
    return View("".join(chars), starts, ends)


def seen(view: View) -> View:
    """``view`` without invisible format characters ("sk-ant\u200b-api03…" is "sk-ant-api03…")."""
    return _without(view, _UNSEEN) if _UNSEEN.search(view.text) else view


# ---- a key split by whitespace ----------------------------------------------------------

# where a key of a known kind begins (Anthropic and OpenAI, GitHub, GitLab, Slack, AWS, JWT)
_KEY_START = re.compile(
    r"(?<![A-Za-z0-9])(?:(?:sk|pk|rk)\s?-|gh[pousr]_|github_pat_|gl[a-z]{2,6}-|xox[abposr]"
    r"|A3T|AKIA|ASIA|ABIA|ACCA|eyJ)"
)
# a piece of a key: key characters only, and a digit, a capital past its first character or a
# joining dash or underscore at an end ("thanks", "Sorry" are words, not pieces of a key)
_PIECE = re.compile(r"[A-Za-z0-9_+/=-]+")
_KEYISH = re.compile(r"[0-9]|.[A-Z]|^[-_]|[-_]$")
_TRAILING = ".,;:!?)]}\"'"
_WORD = re.compile(r"\s*(\S+)")
MAX_JOINED_CHARS = 1_024  # no key is longer: a chain of pieces stops there


def _piece(word: str) -> str | None:
    """``word`` as a piece of a key (its sentence punctuation off), or None."""
    bare = word.rstrip(_TRAILING)
    return bare if bare and _PIECE.fullmatch(bare) and _KEYISH.search(bare) else None


def joined(view: View) -> Iterator[View]:
    """Each run of words that starts a known kind of key and goes on in pieces of one, the
    whitespace between them taken out ("sk-ant-api03-Qx7v R2mN…" is one key). Only the words
    from a key's start on are looked at, each once."""
    text = view.text
    looked = 0  # everything before this was looked at
    for start in _KEY_START.finditer(text):
        if start.start() < looked:
            continue
        word_start = start.start()
        while word_start > looked and not text[word_start - 1].isspace():
            word_start -= 1
        first = _WORD.match(text, word_start)
        assert first is not None  # a key's start is in a word
        chain = [first]
        length = len(first.group(1))
        ended = first.group(1) != first.group(1).rstrip(_TRAILING)  # "sk-…." ends a sentence
        while not ended:
            word = _WORD.match(text, chain[-1].end())
            piece = None if word is None else _piece(word.group(1))
            if word is None or piece is None or length + len(piece) > MAX_JOINED_CHARS:
                break
            chain.append(word)
            length += len(piece)
            ended = piece != word.group(1)  # its sentence ends after it
        looked = chain[-1].end()
        if len(chain) > 1:
            yield _chained(view, chain)


def _chained(view: View, chain: list[re.Match[str]]) -> View:
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    for word in chain:
        chars.append(word.group(1))
        starts += view.starts[word.start(1) : word.end(1)]
        ends += view.ends[word.start(1) : word.end(1)]
    return View("".join(chars), starts, ends)


# ---- encodings --------------------------------------------------------------------------

# What a text may be encoded with: runs of percent-encoded bytes (UTF-8), HTML character
# references, JSON's and Python's escapes
ENCODED = re.compile(
    r"(?:%[0-9A-Fa-f]{2})+"
    r"|&(?:#[xX][0-9A-Fa-f]{1,6}|#[0-9]{1,7}|[A-Za-z][A-Za-z0-9]{1,31});"
    r"|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}"
)
DECODE_ROUNDS = 3  # "%2573" is "%73" once decoded, "s" twice


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


def decoded(view: View) -> View:
    """``view`` with one layer of percent-encoding, HTML references and escapes decoded."""
    chars: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    position = 0
    for match in ENCODED.finditer(view.text):
        chars.append(view.text[position : match.start()])
        starts += view.starts[position : match.start()]
        ends += view.ends[position : match.start()]
        for char, first, last in _decode_token(match.group()):
            chars.append(char)
            starts.append(view.starts[match.start() + first])
            ends.append(view.ends[match.start() + last - 1])
        position = match.end()
    chars.append(view.text[position:])
    starts += view.starts[position:]
    ends += view.ends[position:]
    return View("".join(chars), starts, ends)


BASE64_RUN = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def base64_text(run: str) -> str | None:
    """What a base64 run says, when it says text (printable UTF-8); else None."""
    core = run.rstrip("=")
    if len(core) % 4 == 1:
        return None
    padded = core + "=" * (-len(core) % 4)
    try:
        if "-" in core or "_" in core:
            data = base64.urlsafe_b64decode(padded)
        else:
            data = base64.b64decode(padded, validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    return text if text.replace("\n", "").replace("\t", "").isprintable() else None


def base64_decoded(view: View) -> Iterator[View]:
    """Each base64 run of ``view`` that decodes to text, as that text: every character of it
    stands for the whole run, which is what a credential found in it masks."""
    for match in BASE64_RUN.finditer(view.text):
        text = base64_text(match.group())
        if text:
            start, end = view.span(match.start(), match.end())
            yield View(text, [start] * len(text), [end] * len(text))


def views(text: str) -> Iterator[View]:
    """Every view of ``text`` a credential is looked for in: as seen, then each layer
    decoded; for each, its keys split by whitespace joined and its base64 runs decoded."""
    layer = seen(View.of(text))
    for round_ in range(DECODE_ROUNDS + 1):
        yield layer
        yield from joined(layer)
        yield from base64_decoded(layer)
        if round_ == DECODE_ROUNDS or not ENCODED.search(layer.text):
            return
        layer = seen(decoded(layer))
