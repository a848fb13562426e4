"""A worker's health endpoint: GET /healthz answers 200 while the worker runs and the store
answers, 503 otherwise (for container probes).

It is a liveness probe, not an attack surface: it listens on the loopback interface unless told
otherwise (Kubernetes gives it the pod's address, which the kubelet probes), a request's line
and headers must arrive within HEADER_SECONDS and fit in MAX_REQUEST_BYTES, and it holds at
most MAX_CONNECTIONS: past that the oldest connection still sending its request is dropped,
so idle connections can neither exhaust the process's file descriptors nor lock the probe out.
When descriptors run out anyway (elsewhere in the process), accepting backs off, a connection
still sending is dropped to free one, and the error is logged once per LOG_EVERY_SECONDS with a
count of the ones not logged. Store checks run one at a time on a thread of their own, each
request waiting on the one in flight, and a store silent for CHECK_SECONDS is unhealthy.

Hypercorn (which the codec server and the review inbox run on) has read timeouts but no
connection cap, and it accepts through asyncio's server, which, out of descriptors, logs the
failure with a traceback up to 100 times per wake-up and schedules as many retries (CPython
3.11's selector loop: the source of the 35,621 log lines a probe once caused): hence this small
server of our own, accepting in its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import math
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import text

from store import Store

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
HEADER_SECONDS = 3.0  # a probe sends its request at once; a silent connection is dropped
MAX_REQUEST_BYTES = 8192  # request line and headers; a probe's are a few hundred bytes
MAX_CONNECTIONS = 64  # probes come one at a time; idle connections beyond this are dropped
BACKLOG = 128  # connections the kernel holds until accepted (and dropped, if idle, for room)
CHECK_SECONDS = 5.0  # a store that has not answered by then is unhealthy
LOG_EVERY_SECONDS = 10.0
# When the process has no descriptor to spare, accepting pauses this long before trying again
BACKOFF_SECONDS = 0.05
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class RateLimitedLog:
    """Logs a recurring error at most once per ``every`` seconds, with how many were not."""

    def __init__(self, every: float = LOG_EVERY_SECONDS) -> None:
        self.every = every
        self._last = -math.inf
        self._unlogged = 0

    def error(self, message: str) -> None:
        now = time.monotonic()
        if now - self._last < self.every:
            self._unlogged += 1
            return
        more = f" ({self._unlogged:,} more like it not logged)" if self._unlogged else ""
        log.error("%s%s", message, more)
        self._last, self._unlogged = now, 0


class HealthServer:
    def __init__(
        self,
        port: int,
        store: Store,
        running: Callable[[], bool],
        host: str = DEFAULT_HOST,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.port, self.store, self.running, self.host = port, store, running, host
        self.max_connections = max_connections
        self._listener: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        # connections still sending their request, oldest first: the ones dropped for room
        self._receiving: dict[asyncio.Task[None], None] = {}
        self._checking: asyncio.Future[tuple[bool, dict[str, str]]] | None = None
        # its own thread: a busy default executor never delays the probe's answer
        self._check_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="healthz")
        self._accept_failed = RateLimitedLog()

    def _check(self) -> tuple[bool, dict[str, str]]:
        status = {"worker": "running" if self.running() else "stopped"}
        try:
            with self.store.engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            status["store"] = "ok"
        except Exception as exc:  # any failure means unhealthy, with the reason
            status["store"] = f"unreachable: {type(exc).__name__}"
        return status["worker"] == "running" and status["store"] == "ok", status

    async def _status(self) -> tuple[bool, dict[str, str]]:
        # one check in flight at a time: a burst of probes does not pile up threads
        if self._checking is None or self._checking.done():
            loop = asyncio.get_running_loop()
            self._checking = loop.run_in_executor(self._check_thread, self._check)
        try:
            return await asyncio.wait_for(asyncio.shield(self._checking), CHECK_SECONDS)
        except TimeoutError:
            return False, {
                "worker": "running" if self.running() else "stopped",
                "store": f"no answer within {CHECK_SECONDS:g} s",
            }

    async def _request_target(self, reader: asyncio.StreamReader) -> bytes | None:
        """The request's path, once its line and headers have arrived; None if they are too
        large or malformed."""
        received = 0
        request = b""
        while True:
            line = await reader.readline()  # bounded by the reader's limit
            received += len(line)
            if received > MAX_REQUEST_BYTES or not line.endswith(b"\n"):
                return None
            if not request:
                request = line
            elif not line.strip():
                break
        parts = request.split()
        return parts[1] if len(parts) == 3 else None

    async def _serve(self, conn: socket.socket) -> None:
        task = asyncio.current_task()
        assert task is not None
        writer = None
        try:
            reader, writer = await asyncio.open_connection(sock=conn, limit=MAX_REQUEST_BYTES)
            try:
                async with asyncio.timeout(HEADER_SECONDS):
                    target = await self._request_target(reader)
            except TimeoutError:
                return  # nothing useful to say to a connection that says nothing
            finally:
                self._receiving.pop(task, None)
            if target is None:
                code, body = (400, "Bad Request"), {"error": "malformed or oversized request"}
            elif target == b"/healthz":
                healthy, body = await self._status()
                code = (200, "OK") if healthy else (503, "Service Unavailable")
            else:
                code, body = (404, "Not Found"), {"error": "try /healthz"}
            payload = json.dumps(body).encode()
            writer.write(
                f"HTTP/1.1 {code[0]} {code[1]}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            async with asyncio.timeout(HEADER_SECONDS):  # a peer that does not read is dropped
                await writer.drain()
        except (OSError, ValueError, TimeoutError):  # reset, over the limit, stalled
            pass
        finally:
            self._receiving.pop(task, None)
            self._connections.discard(task)
            if writer is not None:
                writer.close()
            else:
                conn.close()

    def _drop_oldest_receiving(self) -> bool:
        oldest = next(iter(self._receiving), None)
        if oldest is None:
            return False
        del self._receiving[oldest]
        oldest.cancel()  # its own clean-up closes the connection
        return True

    async def _accept(self) -> None:
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._listener)
            except OSError as exc:  # out of descriptors, mostly; the endpoint carries on
                self._accept_failed.error(f"health endpoint cannot accept a connection: {exc}")
                if exc.errno in _OUT_OF_RESOURCES:
                    self._drop_oldest_receiving()  # frees a descriptor for the next one
                await asyncio.sleep(BACKOFF_SECONDS)
                continue
            if len(self._connections) >= self.max_connections and not (
                self._drop_oldest_receiving()
            ):
                conn.close()  # every slot is answering: this one waits for the next probe
                await asyncio.sleep(0)
                continue
            task = asyncio.create_task(self._serve(conn))
            self._connections.add(task)
            self._receiving[task] = None
            # sock_accept returns without yielding while connections wait: let the dropped
            # ones close before taking the next
            await asyncio.sleep(0)

    async def __aenter__(self) -> HealthServer:
        family, kind, proto, _, address = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM
        )[0]
        listener = socket.socket(family, kind, proto)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(address)
            listener.listen(BACKLOG)
            listener.setblocking(False)
        except OSError:
            listener.close()
            raise
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._listener is not None:
            self._listener.close()
        self._check_thread.shutdown(wait=False, cancel_futures=True)
