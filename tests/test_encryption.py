"""Payloads are encrypted in Temporal (AES-GCM); the codec server decrypts for key holders."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import urllib.error
import urllib.request

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from client import start_session
from codec.encryption import EncryptionCodec, EncryptionError, codec_from_env, data_converter
from codec.server import CodecServer
from tests.conftest import awaiting, lineage_history, make_spec, wait_for_state
from tests.test_demo_command import free_port
from worker import build_worker

KEY = base64.b64encode(os.urandom(32)).decode()


def post(port: int, path: str, body: dict, token: str | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


async def test_histories_hold_ciphertext_and_the_codec_server_decrypts(
    client, store, settings, temporal_address
):
    codec = codec_from_env({"TRAINING_CAMP_ENCRYPTION_KEY": KEY})
    secure = await Client.connect(temporal_address, data_converter=data_converter(codec))
    spec = make_spec()
    async with build_worker(secure, store, settings):
        (handle,) = await start_session(secure, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        await handle.signal("score", {"score": 3, "comment": "secret critique"})
        state = await wait_for_state(handle, awaiting(2))
    assert [p.score for p in state.score_history] == [3]  # it all works, encrypted

    # every run of the lineage (it may have continued as new), read by a client without the key
    events = [e async for e in lineage_history(client, handle)]
    raw = b"".join(e.SerializeToString() for e in events)  # payload bytes as stored, not base64
    assert b"secret critique" not in raw and b"You are an expert analyst" not in raw
    signaled = next(e for e in events if e.HasField("workflow_execution_signaled_event_attributes"))
    payload = signaled.workflow_execution_signaled_event_attributes.input.payloads[0]
    assert payload.metadata["encoding"] == b"binary/encrypted"

    token, port = "s3cret", free_port()
    server = CodecServer(codec, origin="http://localhost:8233", token=token)
    await server.start("127.0.0.1", port)
    try:
        wire = {
            "payloads": [
                {
                    "metadata": {
                        k: base64.b64encode(v).decode() for k, v in payload.metadata.items()
                    },
                    "data": base64.b64encode(payload.data).decode(),
                }
            ]
        }
        status, decoded = await asyncio.to_thread(post, port, "/decode", wire, token)
        assert status == 200
        plain = base64.b64decode(decoded["payloads"][0]["data"])
        assert json.loads(plain) == {"score": 3, "comment": "secret critique"}
        status, _ = await asyncio.to_thread(post, port, "/decode", wire)
        assert status == 401
        other = CodecServer(EncryptionCodec(os.urandom(32)), None, None)
        port2 = free_port()
        await other.start("127.0.0.1", port2)
        status, error = await asyncio.to_thread(post, port2, "/decode", wire)
        await other.stop()
        assert status == 400 and "not held here" in error["error"]
    finally:
        await server.stop()


async def test_keys_rotate_and_bad_keys_are_refused():
    old, new = os.urandom(32), os.urandom(32)
    sealed = await EncryptionCodec(old).encode(
        [Payload(metadata={"encoding": b"json/plain"}, data=b'{"a": 1}')]
    )
    rotated = EncryptionCodec(new, old_keys=[old])
    (opened,) = await rotated.decode(sealed)
    assert opened.data == b'{"a": 1}'
    tampered = Payload()
    tampered.CopyFrom(sealed[0])
    tampered.data = tampered.data[:-1] + bytes([tampered.data[-1] ^ 1])
    with pytest.raises(EncryptionError, match="fails authentication"):
        await rotated.decode([tampered])
    with pytest.raises(EncryptionError, match="32 bytes"):
        codec_from_env({"TRAINING_CAMP_ENCRYPTION_KEY": base64.b64encode(b"short").decode()})
    assert codec_from_env({}) is None
