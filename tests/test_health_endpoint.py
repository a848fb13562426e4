"""The worker's health endpoint is a liveness probe, not an attack surface: over real HTTP
against a real worker process, it listens on loopback, drops a request that does not arrive,
holds a bounded number of connections (1,100 idle ones neither exhaust its descriptors nor keep
/healthz from answering), and when the process runs out of descriptors it logs so once, not
thousands of times, and recovers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from services import health
from store import Store
from store.backends.database import create_store_engine
from tests.test_demo_command import free_port

ROOT = Path(__file__).parent.parent
OUT_OF_DESCRIPTORS = "Too many open files"


class Worker:
    def __init__(self, proc: asyncio.subprocess.Process, port: int) -> None:
        self.proc, self.port = proc, port
        self.output: list[str] = []

    def descriptors(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    async def read_output(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.output.append(line.decode(errors="replace"))

    def get(self, path: str = "/healthz", timeout: float = 5.0) -> tuple[int, bytes]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
        return int(answer.split()[1]), answer.partition(b"\r\n\r\n")[2]


def _descriptor_limit(soft: int) -> None:  # in the worker, before it starts
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@contextlib.asynccontextmanager
async def worker_process(
    temporal_address: str, tmp_path: Path, *extra: str
) -> AsyncIterator[Worker]:
    """A worker serving /healthz, its descriptors limited to 1,024 (a common default);
    ``extra``: more options."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        "--health-port",
        str(port),
        *extra,
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "TEMPORAL_ADDRESS": temporal_address,
            "TRAINING_CAMP_DATABASE_URL": f"sqlite:///{tmp_path / 'w.db'}",
            "TRAINING_CAMP_TASK_QUEUE": f"tq-health-{port}",
        },
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        preexec_fn=lambda: _descriptor_limit(1024),
    )
    worker = Worker(proc, port)
    reading = asyncio.create_task(worker.read_output())
    try:
        async with asyncio.timeout(60):
            while not any(line.strip() == "worker ready" for line in worker.output):
                assert not reading.done(), "".join(worker.output)[-3000:]
                await asyncio.sleep(0.05)
        yield worker
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 60)
        await reading


def idle_connections(port: int, count: int) -> list[socket.socket]:
    """``count`` connections opened and never written to (connected without waiting)."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        socks.append(sock)
    return socks


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp gives them) listening on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as rows:
            for row in list(rows)[1:]:
                local, state = row.split()[1], row.split()[3]
                address, _, hex_port = local.rpartition(":")
                if state == "0A" and int(hex_port, 16) == port:
                    found.add(address)
    return found


def outside_address() -> str | None:
    """This machine's address on its default route, if it has one other than loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


async def test_health_endpoint_is_loopback_bounded_and_answers_under_a_flood(
    temporal_address, tmp_path
):
    async with worker_process(temporal_address, tmp_path) as worker:
        status, body = await asyncio.to_thread(worker.get)
        assert status == 200 and b'"store": "ok"' in body

        # loopback only, by default
        assert listening_addresses(worker.port) == {"0100007F"}
        if (address := outside_address()) is not None:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, worker.port), timeout=2).close()

        # a request that never finishes its headers is dropped after HEADER_SECONDS
        def silent_for() -> float:
            with socket.create_connection(("127.0.0.1", worker.port), timeout=10) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: local")
                started = time.monotonic()
                assert sock.recv(1) == b""  # closed, unanswered
                return time.monotonic() - started

        held = await asyncio.to_thread(silent_for)
        assert health.HEADER_SECONDS - 0.5 < held < health.HEADER_SECONDS + 2

        # headers past MAX_REQUEST_BYTES are refused, not buffered
        def oversized() -> bytes:
            with socket.create_connection(("127.0.0.1", worker.port), timeout=10) as sock:
                padding = "a" * health.MAX_REQUEST_BYTES
                sock.sendall(f"GET /healthz HTTP/1.1\r\nX-Pad: {padding}\r\n\r\n".encode())
                answer = b""
                with contextlib.suppress(ConnectionResetError):
                    while chunk := sock.recv(4096):
                        answer += chunk
                return answer

        answer = await asyncio.to_thread(oversized)
        assert b" 200 " not in answer.split(b"\r\n")[0], answer

        # 1,100 idle connections: the worker holds at most MAX_CONNECTIONS of them, never runs
        # out of descriptors, and the probe still gets its answer
        at_rest = worker.descriptors()
        flood = idle_connections(worker.port, 1100)
        try:
            await asyncio.sleep(0.5)
            started = time.monotonic()
            status, _ = await asyncio.to_thread(worker.get)
            assert status == 200 and time.monotonic() - started < 4
            assert worker.descriptors() <= at_rest + health.MAX_CONNECTIONS + 8
        finally:
            for sock in flood:
                sock.close()
        status, _ = await asyncio.to_thread(worker.get, "/nothing")
        assert status == 404
    assert not any(OUT_OF_DESCRIPTORS in line for line in worker.output), worker.output[-5:]


async def test_metrics_listen_on_loopback_unless_told_otherwise(temporal_address, tmp_path):
    metrics = free_port()
    async with worker_process(temporal_address, tmp_path, "--metrics-port", str(metrics)):
        assert listening_addresses(metrics) == {"0100007F"}
        if (address := outside_address()) is not None:
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection((address, metrics), timeout=2).close()
        with socket.create_connection(("127.0.0.1", metrics), timeout=5):
            pass  # served, on loopback
    # told to, it listens on every address (a scraper outside the pod or container)
    metrics = free_port()
    told = ("--metrics-port", str(metrics), "--metrics-host", "0.0.0.0")
    async with worker_process(temporal_address, tmp_path, *told):
        assert listening_addresses(metrics) == {"00000000"}


async def test_out_of_descriptors_is_logged_once_and_the_endpoint_recovers(
    temporal_address, tmp_path
):
    async with worker_process(temporal_address, tmp_path) as worker:
        # leave the worker a handful of descriptors beyond those it uses at rest
        pid, in_use = worker.proc.pid, worker.descriptors()
        soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 6, hard))
        flood = idle_connections(worker.port, 300)
        try:
            await asyncio.sleep(2.5)  # accepting fails all the while
        finally:
            for sock in flood:
                sock.close()
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        # the dropped connections' descriptors come back; the probe is answered again
        deadline = time.monotonic() + health.HEADER_SECONDS + 5
        while True:
            with contextlib.suppress(OSError):
                status, _ = await asyncio.to_thread(worker.get, "/healthz", 2.0)
                if status == 200:
                    break
            assert time.monotonic() < deadline, "/healthz never answered again"
            await asyncio.sleep(0.2)
    logged = [line for line in worker.output if OUT_OF_DESCRIPTORS in line]
    assert 1 <= len(logged) <= 2, logged  # once per LOG_EVERY_SECONDS (10 s), not per attempt


async def test_a_silent_store_is_unhealthy_in_bounded_time_with_one_check_at_a_time():
    """A store that takes connections and never answers (a listener nobody serves): every
    probe of a burst gets 503 within CHECK_SECONDS, and the burst waits on one check."""
    silent = socket.create_server(("127.0.0.1", 0))
    store = Store(create_store_engine(f"postgresql://u@127.0.0.1:{silent.getsockname()[1]}/db"))
    port = free_port()
    loop = asyncio.get_running_loop()
    try:
        async with health.HealthServer(port, store, lambda: True):
            worker = Worker(None, port)  # type: ignore[arg-type]
            started = time.monotonic()
            with ThreadPoolExecutor(max_workers=10) as probes:
                answers = await asyncio.gather(
                    *(loop.run_in_executor(probes, worker.get, "/healthz", 15) for _ in range(10))
                )
            took = time.monotonic() - started
            checks = [t for t in threading.enumerate() if t.name.startswith("healthz")]
            assert len(checks) == 1  # the one check the burst waited on
        assert {status for status, _ in answers} == {503}
        assert all(b"no answer within" in body for _, body in answers), answers
        assert took < health.CHECK_SECONDS + 2
    finally:
        silent.close()  # the check still waiting gets a reset and ends
        store.engine.dispose()
