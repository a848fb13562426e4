"""The review app against other sites, over real HTTP: a cross-site or other-port form post, a
rebound host name, an oversized or dribbled body, and too many live views are refused before
anything reaches a lineage; every page forbids framing."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import time
from typing import Any

import pytest

from client import start_session
from review.guard import MAX_BODY_BYTES, MAX_STREAMS
from review.server import ReviewServer
from tests.conftest import awaiting, make_spec, wait_for_state
from tests.test_review_app import TOKEN, inbox_server
from workflows.lineage import LineageWorkflow

# the review app's test starts the app on a free port; these tests use the same fixture
serve = inbox_server


def request(
    server: ReviewServer,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        connection.request(method, path, body=body or None, headers=headers or {})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def form(**fields: str) -> tuple[bytes, dict[str, str]]:
    body = "&".join(f"{k}={v}" for k, v in fields.items()).encode()
    return body, {"Content-Type": "application/x-www-form-urlencoded"}


async def call(*args: Any, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(request, *args, **kwargs)


async def test_only_the_apps_own_page_can_change_anything(
    client, store, settings, run_worker, serve
):
    spec = make_spec()
    lineage = spec.lineage_id("A")
    server = await serve()
    own = f"http://127.0.0.1:{server.port}"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        body, headers = form(reason="pwned")
        for origin in ("http://evil.example", f"http://127.0.0.1:{server.port + 1}", None):
            sent = {**headers, **({"Origin": origin} if origin else {})}
            status, _, said = await call(server, "POST", f"/lineages/{lineage}/stop", body, sent)
            assert status == 403 and b"own page" in said, origin
        # a page of another port on the same machine, named only in its Referer: still another
        sent = {**headers, "Referer": f"http://127.0.0.1:{server.port + 1}/x"}
        assert (await call(server, "POST", f"/lineages/{lineage}/stop", body, sent))[0] == 403
        state = await handle.query(LineageWorkflow.state)
        assert state.status == "awaiting_score"  # nothing reached the lineage
        # the app's own page may
        body, headers = form(score="7", comment="fine", rater="ana")  # the page names the rater
        sent = {**headers, "Origin": own}
        status, _, said = await call(server, "POST", f"/lineages/{lineage}/score", body, sent)
        assert status == 200, said
        await wait_for_state(handle, awaiting(2))


async def test_a_rebound_host_name_is_refused(serve):
    server = await serve()
    status, _, said = await call(server, "GET", "/", headers={"Host": "attacker.example:8280"})
    assert status == 421 and b"attacker.example" in said
    status, headers, _ = await call(
        server, "GET", "/", headers={"Host": f"localhost:{server.port}"}
    )
    assert status == 200
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY" and headers["x-content-type-options"] == "nosniff"


async def test_with_a_token_a_bearer_header_may_post_but_a_cookie_needs_the_origin(serve):
    server = await serve(token=TOKEN)
    body, headers = form(reason="x", rater="ana")
    cookie = {**headers, "Cookie": f"review_token={TOKEN}"}
    status, _, _ = await call(server, "POST", "/lineages/none/stop", body, cookie)
    assert status == 403  # a signed-in rater's browser, driven by another page
    bearer = {**headers, "Authorization": f"Bearer {TOKEN}"}
    status, _, _ = await call(server, "POST", "/lineages/none/stop", body, bearer)
    assert status == 404  # through the guard: the lineage does not exist


async def test_a_large_body_is_refused_before_it_is_read(serve):
    server = await serve(token=TOKEN)
    big = b"x" * (MAX_BODY_BYTES + 1)
    headers = {"Content-Type": "multipart/form-data; boundary=zz", "Origin": "http://127.0.0.1"}
    status, _, said = await call(server, "POST", "/login", big, headers)
    assert status == 413 and b"over" in said


def dribble(server: ReviewServer) -> tuple[float, bytes]:
    """A body announced and then sent a byte at a time, too slowly: dropped, not waited on."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 500\r\n\r\nt"
        )
        received = b""
        while chunk := sock.recv(4096):
            received += chunk
    return time.monotonic() - started, received


async def test_a_dribbled_body_is_dropped(serve, monkeypatch):
    # the server's read timeout (READ_TIMEOUT_SECONDS, 10 s) shortened: the test waits it out
    read_timeout = 2
    monkeypatch.setattr("review.server.READ_TIMEOUT_SECONDS", read_timeout)
    server = await serve(token=TOKEN)
    took, received = await asyncio.to_thread(dribble, server)
    assert took < 6 * read_timeout  # the connection was closed by the server
    assert b"200 OK" not in received


async def test_live_views_are_capped(serve, monkeypatch):
    server = await serve()
    conns = []
    try:
        for _ in range(MAX_STREAMS):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            await asyncio.to_thread(conn.request, "GET", "/events")
            response = await asyncio.to_thread(conn.getresponse)
            assert response.status == 200
            conns.append(conn)
        status, _, said = await call(server, "GET", "/events")
        assert status == 503 and b"live views" in said
    finally:
        for conn in conns:
            conn.close()


async def test_only_the_apps_own_page_may_ask_for_a_reading(
    client, store, settings, run_worker, serve
):
    """The preview writes nothing but may ask Claude, which costs: another site cannot make a
    rater's browser ask for one. The app's own page gets the reading; a score out of range, a
    lineage nobody knows and a wish that does not parse get their reasons."""
    spec = make_spec()
    lineage = spec.lineage_id("A")
    server = await serve()
    own = f"http://127.0.0.1:{server.port}"
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
        body, headers = form(score="3", comment="Far+too+long.")
        path = f"/lineages/{lineage}/read"
        sent = {**headers, "Origin": "http://evil.example"}
        assert (await call(server, "POST", path, body, sent))[0] == 403
        status, _, said = await call(server, "POST", path, body, {**headers, "Origin": own})
        assert status == 200, said
        reading = json.loads(said)
        assert reading["chips"] == [{"want": "shorter", "label": "shorter"}] and reading["exact"]
        assert reading["said_back"] == "Read as: shorter ('Far too long')"
        for (sent_body, sent_headers), where, expected in [
            (form(score="11", comment="x"), path, 422),
            (form(score="3", comment="x"), "/lineages/nobody/read", 404),
        ]:
            sent = {**sent_headers, "Origin": own}
            status, _, said = await call(server, "POST", where, sent_body, sent)
            assert status == expected, said
        status, _, said = await call(server, "GET", "/wants/label?want=shorter:lots")
        assert status == 422 and b"an amount is half" in said
        status, _, said = await call(server, "GET", "/wants/label?want=remove:table")
        assert status == 200 and json.loads(said) == {"want": "remove:table", "label": "no table"}
        state = await handle.query(LineageWorkflow.state)
    assert state.score_history == [] and state.agent_version == 1  # nothing was sent


def chunked(server: ReviewServer, path: str, body: bytes, headers: dict[str, str]) -> int:
    """``body`` sent in chunks, with no Content-Length: the size is known only as it comes."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    pieces = (body[i : i + 8192] for i in range(0, len(body), 8192))
    try:
        connection.request("POST", path, body=pieces, headers=headers, encode_chunked=True)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.parametrize("token", [None, TOKEN], ids=["no-token", "token"])
async def test_an_oversized_body_gets_413_declared_or_chunked_and_logs_no_traceback(
    serve, caplog, token
):
    server = await serve(token=token)
    body = b"comment=" + b"x" * MAX_BODY_BYTES + b"&score=7"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    headers |= {"Authorization": f"Bearer {token}"} if token else {"Origin": server.url}
    caplog.set_level(logging.DEBUG)
    for path in ("/lineages/none/read", "/lineages/none/score"):
        declared, _, said = await call(server, "POST", path, body, headers)
        assert declared == 413 and b"over" in said, (path, declared)
        assert await asyncio.to_thread(chunked, server, path, body, headers) == 413, path
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
