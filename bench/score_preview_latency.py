"""How soon `training-camp score` shows its reading: the time from the command's start to the
first "Read as" line it prints, on a pseudo-terminal, cancelled at the prompt (nothing sent).

    .venv/bin/python -m bench.score_preview_latency [--runs 20]
    .venv/bin/python -m bench.score_preview_latency --lineage essay-demo-A  # on `make run`

Without ``--lineage`` it starts an in-memory dev server, a worker (offline model) and a store,
and one lineage awaiting its first score; with it, the command runs against what
$TEMPORAL_ADDRESS and $TRAINING_CAMP_DATABASE_URL name (a running `make run`). One run is made
first and not counted (the worker's reader loaded, the files in the page cache: a warm
machine). Prints the median and p90 over ``--runs``. Target: median ≤ 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pty
import select
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).parent.parent
COMMENT = "Way too long, wanted quick bullets. It wanders off on tangents."
READING = b"Read as"
TAKE = b"Take it [t], edit it [e] or cancel [c]? "


def time_to_reading(lineage: str, env: dict[str, str], timeout: float = 60) -> float:
    """Seconds from starting `training-camp score` on a terminal until it prints the reading;
    then cancelled at the prompt. AssertionError when it prints no reading, or sends."""
    master, slave = pty.openpty()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "starter.py", "score", lineage, "3", COMMENT, "--rater", "bench"],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    printed, seen_at = b"", None
    try:
        while time.perf_counter() - started < timeout:
            if not select.select([master], [], [], 0.5)[0]:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break  # the command ended
            if not chunk:
                break
            printed += chunk
            if seen_at is None and READING in printed:
                seen_at = time.perf_counter() - started
            if TAKE in printed:
                os.write(master, b"c\r")
                printed = printed.replace(TAKE, b"")
        proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = printed.decode(errors="replace")
    assert seen_at is not None, f"no reading printed:\n{text}"
    assert "Cancelled: nothing sent." in text, text
    return seen_at


def summary(times: list[float]) -> str:
    ordered = sorted(times)
    p90 = ordered[max(0, round(0.9 * len(ordered)) - 1)]
    return (
        f"time to the first printed reading over {len(times)} runs: "
        f"median {statistics.median(times) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, "
        f"min {ordered[0] * 1000:.0f} ms, max {ordered[-1] * 1000:.0f} ms"
    )


def measure(lineage: str, env: dict[str, str], runs: int) -> list[float]:
    time_to_reading(lineage, env)  # warm: not counted
    times = []
    for n in range(runs):
        times.append(time_to_reading(lineage, env))
        print(f"run {n + 1}: {times[-1] * 1000:.0f} ms", flush=True)
    return times


async def on_own_server(runs: int) -> list[float]:
    """A dev server, a worker and one lineage awaiting its first score, of this process."""
    from client import await_output, start_session
    from domain.settings import Settings
    from services.dev_server import start_in_memory
    from store import Store
    from tests.conftest import make_spec
    from worker import build_worker

    env_server = await start_in_memory()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(f"sqlite:///{tmp}/bench.db")
            queue = f"bench-{uuid.uuid4().hex[:8]}"
            settings = Settings(task_queue=queue, database_url=str(store.engine.url))
            try:
                async with build_worker(env_server.client, store, settings):
                    spec = make_spec()
                    (handle,) = await start_session(env_server.client, spec, queue)
                    await await_output(handle, 1)
                    env = {
                        "PATH": os.environ["PATH"],
                        "COLUMNS": "200",
                        "TERM": "dumb",
                        "TEMPORAL_ADDRESS": env_server.client.service_client.config.target_host,
                        "TRAINING_CAMP_DATABASE_URL": settings.database_url,
                        "TRAINING_CAMP_TASK_QUEUE": queue,
                    }
                    # the worker runs on this process's event loop: the commands run in a thread
                    return await asyncio.to_thread(measure, spec.lineage_id("A"), env, runs)
            finally:
                store.close()
    finally:
        await env_server.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--lineage", help="a lineage of a running demo ($TEMPORAL_ADDRESS); default: our own"
    )
    args = parser.parse_args()
    if args.lineage:
        env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
        times = measure(args.lineage, env, args.runs)
    else:
        times = asyncio.run(on_own_server(args.runs))
    print(summary(times))


if __name__ == "__main__":
    main()
