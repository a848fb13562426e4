"""The keys that sign the event log's hash chain, kept outside the database.

Unkeyed, each event's chain hash is a SHA-256 over the one before it and the event's fields:
it finds damage and edits by anyone who does not recompute the chain, but whoever can write to
the database can recompute it. Keyed, each link is an HMAC-SHA256 under a key the database never
sees, stored as ``<key id>:<mac>``, and the chain head carries a seal (a MAC over where the log
ends), so rewriting, removing or truncating events consistently needs the key.

The current key signs new events. Keys rotated out stay listed as old keys and still verify the
events they signed; ``training-camp-data rekey`` re-signs the whole log with the current key, after
which old keys can go.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

KEY_ENV = "TRAINING_CAMP_CHAIN_KEY"
KEY_FILE_ENV = "TRAINING_CAMP_CHAIN_KEY_FILE"
OLD_KEYS_ENV = "TRAINING_CAMP_CHAIN_OLD_KEYS"
MIN_KEY_BYTES = 32
_KEY_NAMES = f"{KEY_ENV}, {OLD_KEYS_ENV}"


class ChainKeyError(ValueError):
    """A chain key that cannot be used (not base64, or too short)."""


@dataclass(frozen=True)
class ChainKeys:
    current: bytes | None = None
    old: tuple[bytes, ...] = ()
    _by_id: dict[str, bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = [k for k in (self.current, *self.old) if k is not None]
        object.__setattr__(self, "_by_id", {key_id(k): k for k in keys})

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ChainKeys:
        """``TRAINING_CAMP_CHAIN_KEY`` (or ``…_KEY_FILE``): base64 of at least 32 random bytes,
        e.g. ``openssl rand -base64 32``; ``TRAINING_CAMP_CHAIN_OLD_KEYS``: comma-separated."""
        text = env.get(KEY_ENV, "").strip()
        if not text and env.get(KEY_FILE_ENV):
            text = Path(env[KEY_FILE_ENV]).read_text().strip()
        old = [k.strip() for k in env.get(OLD_KEYS_ENV, "").split(",") if k.strip()]
        return cls(
            current=_decode(text, KEY_ENV) if text else None,
            old=tuple(_decode(k, OLD_KEYS_ENV) for k in old),
        )

    @property
    def keyed(self) -> bool:
        return self.current is not None

    def link(self, material: bytes) -> str:
        """The chain hash of an event whose fields (previous link first) are ``material``."""
        if self.current is None:
            return hashlib.sha256(material).hexdigest()
        return f"{key_id(self.current)}:{_mac(self.current, material)}"

    def seal(self, position: int, chain: str) -> str:
        """The head's seal: where the log ends, signed ('' without a key)."""
        if self.current is None:
            return ""
        return f"{key_id(self.current)}:{_mac(self.current, _head_material(position, chain))}"

    def check_link(self, stored: str, material: bytes) -> str | None:
        """None when ``stored`` is the right link for ``material``, else what is wrong."""
        if ":" not in stored:
            if hashlib.sha256(material).hexdigest() != stored:
                return "chain broken — the row was edited, or an earlier event was removed"
            if self.keyed:
                return "not signed, though a chain key is set (run `training-camp-data rekey`)"
            return None
        kid, mac = stored.split(":", 1)
        key = self._by_id.get(kid)
        if key is None:
            return f"signed with key {kid}, which is not among the keys given ({_KEY_NAMES})"
        if not hmac.compare_digest(_mac(key, material), mac):
            return "chain broken — the row was edited, or an earlier event was removed"
        return None

    def check_seal(self, seal: str, position: int, chain: str) -> str | None:
        """None when the head's ``seal`` matches where the log ends, else what is wrong."""
        if not seal:
            if self.keyed or ":" in chain:
                return (
                    "the chain head is not sealed, though a chain key is set or the log is signed"
                )
            return None
        kid, mac = seal.split(":", 1) if ":" in seal else ("", seal)
        key = self._by_id.get(kid)
        if key is None:
            return (
                f"the chain head is sealed with key {kid or '?'}, which is not among the keys given"
            )
        if not hmac.compare_digest(_mac(key, _head_material(position, chain)), mac):
            return (
                f"the chain head's seal does not match a log ending at event {position}: "
                "events at the end were removed, or the head was moved"
            )
        return None


UNKEYED = ChainKeys()


def key_id(key: bytes) -> str:
    """A short public name for a key: which key signed an event, without revealing it."""
    return hashlib.sha256(b"training-camp chain key\x1f" + key).hexdigest()[:8]


def _mac(key: bytes, material: bytes) -> str:
    return hmac.new(key, material, hashlib.sha256).hexdigest()


def _head_material(position: int, chain: str) -> bytes:
    return f"head\x1f{position}\x1f{chain}".encode()


def _decode(text: str, name: str) -> bytes:
    try:
        key = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ChainKeyError(
            f"{name}: not base64 (make one with `openssl rand -base64 32`)"
        ) from None
    if len(key) < MIN_KEY_BYTES:
        raise ChainKeyError(
            f"{name}: {len(key)} bytes; a chain key needs at least {MIN_KEY_BYTES} random bytes"
        )
    return key
