"""Encryption of Temporal payloads (AES-256-GCM), so workflow histories hold ciphertext only.

Keys come from ``TRAINING_CAMP_ENCRYPTION_KEY`` (base64 of 32 bytes) or a file named by
``TRAINING_CAMP_ENCRYPTION_KEY_FILE``; ``TRAINING_CAMP_ENCRYPTION_OLD_KEYS`` (comma-separated)
keeps rotated-out keys for decryption. Every payload records the id of the key that sealed it.
The codec server (``codec/server.py``, ``training-camp-codec``) lets the Web UI and the CLI
show decrypted payloads to those who hold the key.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, PayloadCodec

ENCODING = b"binary/encrypted"
KEY_ID = "encryption-key-id"


class EncryptionError(ValueError):
    """A payload that cannot be decrypted here (unknown key, or tampered ciphertext)."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(key).hexdigest()[:12]


def parse_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        raise EncryptionError(f"{where}: not base64") from None
    if len(key) != 32:
        raise EncryptionError(f"{where}: an AES-256 key is 32 bytes, got {len(key)}")
    return key


class EncryptionCodec(PayloadCodec):
    def __init__(self, key: bytes, old_keys: Sequence[bytes] = ()) -> None:
        self.key_id = key_id(key)
        self._keys = {key_id(k): AESGCM(k) for k in (*old_keys, key)}

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            nonce = os.urandom(12)
            sealed = self._keys[self.key_id].encrypt(nonce, payload.SerializeToString(), None)
            out.append(
                Payload(
                    metadata={"encoding": ENCODING, KEY_ID: self.key_id.encode()},
                    data=nonce + sealed,
                )
            )
        return out

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        out = []
        for payload in payloads:
            if payload.metadata.get("encoding") != ENCODING:
                out.append(payload)  # written before encryption was turned on
                continue
            kid = payload.metadata.get(KEY_ID, b"").decode()
            aes = self._keys.get(kid)
            if aes is None:
                raise EncryptionError(f"payload sealed with key {kid!r}, which is not held here")
            try:
                plain = aes.decrypt(payload.data[:12], payload.data[12:], None)
            except InvalidTag:
                raise EncryptionError(f"payload under key {kid!r} fails authentication") from None
            decoded = Payload()
            decoded.ParseFromString(plain)
            out.append(decoded)
        return out


def codec_from_env(env: dict[str, str] | None = None) -> EncryptionCodec | None:
    env = dict(os.environ if env is None else env)
    text = env.get("TRAINING_CAMP_ENCRYPTION_KEY")
    where = "TRAINING_CAMP_ENCRYPTION_KEY"
    if not text and env.get("TRAINING_CAMP_ENCRYPTION_KEY_FILE"):
        path = Path(env["TRAINING_CAMP_ENCRYPTION_KEY_FILE"])
        where = str(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise EncryptionError(f"{path}: cannot read the key file: {exc.strerror}") from None
    if not text:
        return None
    old = [
        parse_key(k, "TRAINING_CAMP_ENCRYPTION_OLD_KEYS")
        for k in env.get("TRAINING_CAMP_ENCRYPTION_OLD_KEYS", "").split(",")
        if k.strip()
    ]
    return EncryptionCodec(parse_key(text, where), old)


def data_converter(codec: PayloadCodec | None) -> DataConverter:
    if codec is None:
        return pydantic_data_converter
    return dataclasses.replace(pydantic_data_converter, payload_codec=codec)
