"""The README's main command, as a user runs it: dev server + UI + worker + example session;
Ctrl-C stops everything it started; running it again resumes the same lineages. Started as a
background job (SIGINT ignored), Ctrl-C, SIGTERM and the dev server's end each stop it too."""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import socket
import sys
import urllib.request
from pathlib import Path

import psutil

from demo.session import STOP_SECONDS
from demo.watch import changes
from services.dev_server import port_open
from tests.conftest import lineage_state, temporal_cli

ROOT = Path(__file__).parent.parent
# The demo's dispositions are set here, not inherited from whatever runs the suite (a suite run
# as a background job has SIGINT ignored, and an ignored signal stays ignored across exec)
LAUNCH = (
    "import os, signal, sys; "
    "signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
    "signal.signal(signal.SIGTERM, signal.SIG_DFL); "
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])"
)
# How long a stop may take: the demo's own bound, and the dev server's stop after it
STOP_BOUND = STOP_SECONDS + 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Demo:
    def __init__(
        self,
        data_dir: Path,
        port: int,
        ui_port: int,
        review_port: int = 0,
        sigint: str = "SIG_DFL",  # SIG_IGN: as a shell starts a background job (`make run &`)
    ) -> None:
        self.args = [
            sys.executable,
            "-c",
            LAUNCH,
            sigint,
            "starter.py",
            "demo",
            "examples/essay-session.yaml",
            "--data-dir",
            str(data_dir),
            "--port",
            str(port),
            "--ui-port",
            str(ui_port),
            "--review-port",
            str(review_port or free_port()),
        ]
        self.output = ""
        # a read may end inside a character ("│", "→"): decode across reads
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINING_CAMP_")}
        self.proc = await asyncio.create_subprocess_exec(
            *self.args,
            cwd=ROOT,
            env={**env, "COLUMNS": "200"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # a process group of its own, as a shell's job has
        )

    async def expect(self, text: str, timeout: float = 60) -> None:
        assert self.proc and self.proc.stdout

        async def read() -> None:
            while text not in self.output:
                chunk = await self.proc.stdout.read(4096)
                if not chunk:
                    raise AssertionError(f"demo exited before printing {text!r}:\n{self.output}")
                self.output += self._decoder.decode(chunk)

        await asyncio.wait_for(read(), timeout)

    async def interrupt(self) -> int:
        """Ctrl-C as a terminal sends it: SIGINT to the job's whole process group."""
        assert self.proc
        os.killpg(self.proc.pid, signal.SIGINT)
        return await self.ended()

    async def terminate(self) -> int:
        """`kill PID`: SIGTERM to the demo's process alone."""
        assert self.proc
        self.proc.terminate()
        return await self.ended()

    async def ended(self, timeout: float = STOP_BOUND) -> int:
        """The exit code, once the demo has ended (failing after ``timeout`` seconds, the
        demo and all it started killed)."""
        assert self.proc
        try:
            rest, _ = await asyncio.wait_for(self.proc.communicate(), timeout)
        except TimeoutError:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise AssertionError(
                f"the demo still runs {timeout:g} s later:\n{self.output[-3000:]}"
            ) from None
        self.output += self._decoder.decode(rest, final=True)
        return self.proc.returncode

    def dev_server(self) -> psutil.Process:
        """The Temporal dev server the demo started."""
        assert self.proc
        (server,) = [c for c in psutil.Process(self.proc.pid).children() if c.name() == "temporal"]
        return server


async def test_demo_runs_stops_and_resumes(tmp_path):
    port, ui_port, review_port = free_port(), free_port(), free_port()
    demo = Demo(tmp_path / "data", port, ui_port, review_port)
    await demo.start()
    await demo.expect("B cycle 1 · agent v1 · awaiting_score")
    await demo.expect("A cycle 1 · agent v1 · awaiting_score")
    assert f"http://localhost:{ui_port}/namespaces/default/workflows" in demo.output
    inbox = f"http://127.0.0.1:{review_port}/sessions/essay-demo"
    assert f"Review inbox: {inbox}" in demo.output
    page = await asyncio.to_thread(lambda: urllib.request.urlopen(inbox, timeout=10).read())
    assert b'id="lineage-essay-demo-A"' in page
    assert "Wait for cycle 2's output" in demo.output
    assert "workflow signal" in demo.output and "--workflow-id lineage-essay-demo-A" in demo.output

    sent = await temporal_cli(
        f"127.0.0.1:{port}",
        "workflow",
        "signal",
        "--workflow-id",
        "lineage-essay-demo-A",
        "--name",
        "score",
        "--input",
        '{"score": 3, "comment": "Way too long, wanted quick bullets"}',
    )
    assert sent.returncode == 0, sent.stderr
    await demo.expect("A cycle 2 · agent v2 · awaiting_score")
    assert await demo.interrupt() == 0
    assert not port_open("127.0.0.1", port)  # the server it started is gone
    assert (tmp_path / "data" / "temporal.db").exists()
    assert (tmp_path / "data" / "training-camp.db").exists()

    # Again, as a background job this time (`make run &`: SIGINT ignored); Ctrl-C still stops
    # it, within its bound, with the server it started
    again = Demo(tmp_path / "data", port, ui_port, sigint="SIG_IGN")
    await again.start()
    await again.expect("A cycle 2 · agent v2 · awaiting_score")  # resumed, not restarted
    assert "Wait for cycle 3's output" in again.output  # the hint follows the lineage
    assert "Traceback" not in again.output
    assert await again.interrupt() == 0  # within STOP_BOUND seconds
    assert not port_open("127.0.0.1", port)


async def test_a_background_demo_stops_on_sigterm_and_when_its_server_dies(tmp_path):
    """Started as a background job (SIGINT ignored, as `make run &` and a suite run in the
    background start it): `kill` (SIGTERM to the demo alone) stops it and the server it
    started; the dev server dying under it stops it too, and it says so (exit code 1). Each
    within its bound (Ctrl-C on such a job: test_demo_runs_stops_and_resumes)."""
    port, ui_port = free_port(), free_port()
    for stop in ("SIGTERM", "server killed"):
        demo = Demo(tmp_path / "data", port, ui_port, sigint="SIG_IGN")
        await demo.start()
        await demo.expect("A cycle 1 · agent v1 · awaiting_score")
        if stop == "SIGTERM":
            assert await demo.terminate() == 0, demo.output  # within STOP_BOUND seconds
            assert "Stopping…" in demo.output
        else:
            await asyncio.to_thread(demo.dev_server().kill)
            assert await demo.ended() == 1, demo.output
            assert "The Temporal dev server stopped" in demo.output
        assert not port_open("127.0.0.1", port), stop  # nothing it started is left
        assert "Traceback" not in demo.output, demo.output


def test_the_demo_screen_shows_each_change_once():
    """What `make run` prints between two looks at a lineage: five rejections sent within a
    second are five lines; an accepted directive, a lock and an unlock are shown; an output is
    shown once for its cycle, not again when something else changes."""
    first = lineage_state()
    shown = changes(None, first)
    assert sum("│" in line for line in shown) == 2  # the output, once
    burst = lineage_state(
        rejected_feedback=5,
        recent_rejections=[f"score: Input should be ≤ 10 (got {n})" for n in range(11, 16)],
        sticky_directives=["Be brief."],
        locked=True,
    )
    lines = changes(first, burst)
    assert sum("rejected:" in line for line in lines) == 5
    assert any("sticky directive accepted:[/cyan] Be brief." in line for line in lines)
    assert any("locked" in line for line in lines)
    assert not any("│" in line for line in lines)  # the same output is not printed again
    assert any("unlocked" in line for line in changes(burst, lineage_state(locked=False)))
    assert changes(burst, burst) == []
