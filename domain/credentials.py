"""What a credential looks like: where one is in a text.

The kinds are detect-secrets' (a maintained detector; its plugins' patterns, not a hand-kept
copy): AWS access key ids and secrets, GitHub, GitLab, Slack, Stripe, PyPI, SendGrid, Discord,
Telegram, Square, Azure storage and Mailchimp tokens, JSON Web Tokens, private keys (PEM, PuTTY)
and, where a string looks like a key, high entropy. Added to them are the shapes detect-secrets
lacks: ``sk-``/``pk-``/``rk-`` keys (Anthropic's ``sk-ant-…`` among them), bearer and Basic
tokens, and ``password = …``-style pairs.

Every search is linear in the text: detect-secrets' patterns that are are run on the text
whole; its JWT pattern (which backtracks over a run of ``eyJ`` with no dot) is run only on
candidates a linear scan picks out, one per header.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector

from domain.text_views import base64_text

# detect-secrets' token plugins whose patterns match in time linear in the text
_TOKENS: tuple[RegexBasedDetector, ...] = (
    AWSKeyDetector(),
    AzureStorageKeyDetector(),
    DiscordBotTokenDetector(),
    GitHubTokenDetector(),
    GitLabTokenDetector(),
    MailchimpDetector(),
    PypiTokenDetector(),
    SendGridDetector(),
    SlackDetector(),
    SquareOAuthDetector(),
    StripeDetector(),
    TelegramBotTokenDetector(),
)
_PRIVATE_KEY = PrivateKeyDetector()
_JWT = JwtTokenDetector()
_ENTROPY = Base64HighEntropyString()  # its limit (4.5 bits a character) is the threshold

# the shapes detect-secrets lacks
_SHAPES = re.compile(
    # Authorization: Bearer …; a token has a digit or a capital past its first character
    # (people's text passes through here too: "a basic introduction." is no token)
    r"\b((?i:bearer|basic))\s+(?=.[a-z._~+/=-]*[A-Z0-9])[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:\b(?:sk|pk|rk)-(?:ant-)?[A-Za-z0-9_-]{8,})"  # sk-…, sk-ant-… keys
    r"|\b((?i:x-api-key|api[_-]?key|access[_-]?token|secret|password))(\"?\s*[:=]\s*\"?)"
    r"[^\s\"',;}]{6,}"
)
# the rest of the token a found secret sits in ("ghp_" and 36 characters, and what follows)
_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_+/-]*=*")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{1,40}-----")
_PEM_BODY = re.compile(r"[-A-Za-z0-9+/=\s:,]*")
# a JWT: a header of key characters before a dot, then its payload
_JWT_PART = re.compile(r"[A-Za-z0-9_=-]*")
_JWT_SIGNATURE = re.compile(r"[A-Za-z0-9_.+/=-]*")
# a string judged by its entropy: long, mixing capitals, small letters and digits (a hash is
# hex, an id is hex or lower case: neither is looked at), and said to be a key just before it
# ("aws_secret_access_key = …", "my token is …"; a document's id in a link is no key)
_KEY_RUN = re.compile(r"[A-Za-z0-9+/_-]{20,}=*")
_KEY_WORD = re.compile(r"(?i:key|secret|token|passw|pwd|credential|auth|api)")
KEY_WORD_REACH = 40  # how far before a string its key word may be
_MIXED = (
    frozenset(string.ascii_uppercase),
    frozenset(string.ascii_lowercase),
    frozenset(string.digits),
)


@dataclass(frozen=True, slots=True)
class Found:
    """A credential at ``text[start:end]``; ``keep`` is what of it stays, before the mask
    ("Bearer ", "x-api-key: "): what kind of thing was there, not the thing."""

    start: int
    end: int
    keep: str = ""


def find(text: str) -> list[Found]:
    """Every credential in ``text``, in no particular order (spans may overlap)."""
    found = [_shape(m) for m in _SHAPES.finditer(text)]
    for plugin in _TOKENS:
        for secret in set(plugin.analyze_string(text)):
            found += _occurrences(text, secret)
    found += _private_keys(text)
    found += _jwts(text)
    return found + _keylike(text, found)


def _shape(match: re.Match[str]) -> Found:
    if match.group(1):  # keep the scheme: "Bearer [redacted]"
        return Found(match.start(), match.end(), f"{match.group(1)} ")
    if match.group(2):  # keep the field name: "x-api-key: [redacted]"
        return Found(match.start(), match.end(), f"{match.group(2)}{match.group(3)}")
    return Found(match.start(), match.end())


def _occurrences(text: str, secret: str) -> list[Found]:
    """Each place ``secret`` is in ``text``, to the end of the token it sits in."""
    found = []
    start = text.find(secret)
    while start >= 0 and secret:
        end = _TOKEN_TAIL.match(text, start + len(secret)).end()  # type: ignore[union-attr]
        found.append(Found(start, end))
        start = text.find(secret, end)
    return found


def _private_keys(text: str) -> list[Found]:
    """Each private key: from its BEGIN line to its END line, or to the end of its body."""
    found = []
    for marker in set(_PRIVATE_KEY.analyze_string(text)):
        start = text.find(marker)
        while start >= 0:
            begin = start - 5 if text[max(0, start - 5) : start] == "-----" else start
            # to its END line or, cut short, to the end of its body
            ending = _PEM_END.search(text, start) or _PEM_BODY.match(text, start)
            end = ending.end()  # type: ignore[union-attr]
            found.append(Found(begin, end))
            start = text.find(marker, end)
    return found


def _jwts(text: str) -> list[Found]:
    """Each JSON Web Token detect-secrets' JWT plugin accepts, with its signature. Its
    pattern is given one candidate per header (the first ``eyJ`` that runs to a dot), so a
    run of ``eyJ`` without a dot costs one pass, not one per ``eyJ``."""
    found = []
    position = text.find("eyJ")
    while position >= 0:
        header_end = _JWT_PART.match(text, position).end()  # type: ignore[union-attr]
        if header_end < len(text) and text[header_end] == ".":
            payload_end = _JWT_PART.match(text, header_end + 1).end()  # type: ignore[union-attr]
            candidate = f"{text[position:payload_end]}."  # header.payload. as the plugin reads it
            if payload_end > header_end + 1 and any(_JWT.analyze_string(candidate)):
                end = _JWT_SIGNATURE.match(text, payload_end).end()  # type: ignore[union-attr]
                found.append(Found(position, end))
                position = text.find("eyJ", end)
                continue
        position = text.find("eyJ", max(header_end, position + 3))
    return found


def _keylike(text: str, known: list[Found]) -> list[Found]:
    """Each string that looks like a key: said to be one, long, mixing capitals, small letters
    and digits, saying no text once base64-decoded, with detect-secrets' entropy above its
    limit. A string inside a credential ``known`` already is not weighed again."""
    found = []
    ends = sorted((f.start, f.end) for f in known)
    covered, i = 0, 0  # where the known credentials starting before a run reach
    for match in _KEY_RUN.finditer(text):
        while i < len(ends) and ends[i][0] <= match.start():
            covered = max(covered, ends[i][1])
            i += 1
        if match.end() <= covered:
            continue
        run = match.group().rstrip("=")
        chars = set(run)
        if not all(chars & kind for kind in _MIXED) or base64_text(match.group()) is not None:
            continue
        if not _KEY_WORD.search(text, max(0, match.start() - KEY_WORD_REACH), match.start()):
            continue
        if _ENTROPY.calculate_shannon_entropy(run) > _ENTROPY.entropy_limit:
            found.append(Found(match.start(), match.end()))
    return found
