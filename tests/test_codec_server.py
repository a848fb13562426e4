"""The codec server under hostile requests: the token is checked before the body is read,
bodies are capped, malformed framing is refused with a response, idle connections are closed."""

from __future__ import annotations

import asyncio
import os

import pytest

from codec.encryption import EncryptionCodec
from codec.server import IDLE_SECONDS, MAX_REQUESTS_IN_FLIGHT, CodecServer
from tests.test_demo_command import free_port

TOKEN = "s3cret-token"
ORIGIN = "http://localhost:8233"


@pytest.fixture
async def server():
    port = free_port()
    codec_server = CodecServer(EncryptionCodec(os.urandom(32)), ORIGIN, TOKEN, max_body_bytes=4096)
    await codec_server.start("127.0.0.1", port)
    yield port
    await codec_server.stop()


async def exchange(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    """Send ``request`` as is and read until the server closes or goes quiet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        return head
    finally:
        writer.close()


def status(head: bytes) -> int:
    return int(head.split(b" ", 2)[1])


async def test_a_stranger_is_refused_before_the_body_is_read(server):
    # 400 MB announced, none of it sent: the answer comes at once
    head = await exchange(
        server, b"POST /decode HTTP/1.1\r\nHost: x\r\nContent-Length: 400000000\r\n\r\n"
    )
    assert status(head) == 401
    wrong = await exchange(
        server,
        b"POST /decode HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret-tokeX\r\n"
        b"Content-Length: 400000000\r\n\r\n",
    )
    assert status(wrong) == 401


async def test_bodies_over_the_cap_are_refused(server):
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    huge = await exchange(
        server,
        b"POST /decode HTTP/1.1\r\nHost: x\r\n"
        + auth
        + b"Content-Length: 10"
        + b"0" * 12
        + b"\r\n\r\n",
    )
    assert status(huge) == 413
    chunk = b"1000\r\n" + b"x" * 4096 + b"\r\n"  # chunked: no length declared up front
    chunked = await exchange(
        server,
        b"POST /decode HTTP/1.1\r\nHost: x\r\n"
        + auth
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + chunk * 2,
    )
    assert status(chunked) == 413


async def test_malformed_framing_gets_an_answer(server):
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    bad = await exchange(
        server, b"POST /decode HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: abc\r\n\r\n"
    )
    assert status(bad) == 400
    body = b'{"payloads": [{"data": "%%%"}]}'
    not_base64 = await exchange(
        server,
        b"POST /decode HTTP/1.1\r\nHost: x\r\n"
        + auth
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body,
    )
    assert status(not_base64) == 400


async def test_an_idle_connection_is_closed(server):
    reader, writer = await asyncio.open_connection("127.0.0.1", server)
    writer.write(b"POST /decode HTTP/1.1\r\nHost: x\r\n")  # and then nothing
    await writer.drain()
    closed = await asyncio.wait_for(reader.read(), IDLE_SECONDS + 5)
    assert closed == b""  # the server hung up
    writer.close()


async def test_the_web_ui_preflight_is_answered_without_a_token(server):
    head = await exchange(
        server,
        b"OPTIONS /decode HTTP/1.1\r\nHost: x\r\nOrigin: "
        + ORIGIN.encode()
        + b"\r\nAccess-Control-Request-Method: POST\r\n"
        b"Access-Control-Request-Headers: authorization, content-type, x-namespace\r\n\r\n",
    )
    assert status(head) == 200
    assert f"access-control-allow-origin: {ORIGIN}".encode() in head.lower()


async def test_dribbling_senders_neither_lock_out_others_nor_stay(server_slow):
    """More senders than there are slots, each dribbling a byte now and then (the per-read
    timeout never fires): a real request is still answered, and each dribbler is cut off."""
    port, body_seconds = server_slow
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()

    async def dribble() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(
                b"POST /decode HTTP/1.1\r\nHost: x\r\n" + auth + b"Content-Length: 500\r\n\r\n{"
            )
            await writer.drain()
            while True:
                try:
                    return await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 2.0)
                except TimeoutError:
                    writer.write(b" ")  # one more byte, well within the read timeout
                    await writer.drain()
                except (asyncio.IncompleteReadError, ConnectionError):
                    return b""
        finally:
            writer.close()

    dribblers = [asyncio.create_task(dribble()) for _ in range(MAX_REQUESTS_IN_FLIGHT + 8)]
    await asyncio.sleep(1.0)
    body = b'{"payloads": []}'
    answer = await exchange(
        port,
        b"POST /decode HTTP/1.1\r\nHost: x\r\n"
        + auth
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body,
    )
    assert status(answer) == 200  # not locked out by the dribblers
    heads = await asyncio.wait_for(asyncio.gather(*dribblers), 4 * body_seconds)
    assert all(h == b"" or status(h) == 408 for h in heads)
    assert any(h and status(h) == 408 for h in heads)


async def test_a_million_empty_payloads_are_refused_cheaply(server_slow):
    port, _ = server_slow
    body = b'{"payloads": [' + b",".join([b"{}"] * 1_000_000) + b"]}"
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    head = await exchange(
        port,
        b"POST /decode HTTP/1.1\r\nHost: x\r\n"
        + auth
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body,
        timeout=30,
    )
    assert status(head) == 400


@pytest.fixture
async def server_slow():
    port, body_seconds = free_port(), 3.0
    codec_server = CodecServer(
        EncryptionCodec(os.urandom(32)), ORIGIN, TOKEN, body_seconds=body_seconds
    )
    await codec_server.start("127.0.0.1", port)
    yield port, body_seconds
    await codec_server.stop()
