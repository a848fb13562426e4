"""Orchestration overhead per cycle, and many lineages waiting on one worker.

    .venv/bin/python -m bench.lineage_load [--lineages 500] [--cycles 3] [--rounds 3]

1. Overhead: 20 lineages x N cycles (offline model, SQLite store) against the same number of
   bare workflows running as many trivial activities, of the same kinds (local or on the task
   queue), at the same points of each cycle (bench/bare_workflow.py), driven the same way, in
   the same run: both warmed up, then alternated, medians compared. Target: ratio <= 1.3.
   The bare workflows run in Temporal's workflow sandbox (the SDK's default); the lineage runs
   outside it (workflows/lineage.py says why), so bare workflows outside it are measured too.
   The driver waits on each side's `await_output` update (``--poll``: polls queries every
   0.1 s instead, which loads both sides with query traffic). Also printed: CPU per
   lineage-cycle, of the Temporal server and of this process (worker, client, driver), for each
   side: on two shared cores, CPU is what the wall time is made of.
2. Load: 500 lineages started and waiting for a score on one worker: this process's peak RSS
   (worker + client), and score -> next output latency (signal sent until `await_output`
   returns the next cycle; ``--poll``: until the `state` query, polled every 5 ms, shows it)
   for 100 of them; the Temporal dev server's peak RSS beside it. Targets: <= 500 MB,
   p95 <= 0.5 s.
3. Burst: 200 more of them scored at once (``--burst``): p50 / p95 / max of score -> next
   output, and lineage-cycles/s; then the same burst of bare workflows (in the sandbox and
   outside it), the ceiling that Temporal, its Python SDK and this machine set. Targets:
   p95 <= 4 s, >= 60 cycles/s.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench import canned_activities
from bench.bare_workflow import BareCycleWorkflow, noop
from client import await_output, start_session
from domain.settings import Settings
from services.dev_server import start_in_memory
from store import Store
from tests.conftest import make_spec
from worker import build_worker, tune_garbage_collector
from workflows.lineage import LineageWorkflow


async def poll_until(check: Callable[[], Awaitable[bool]], every: float = 0.1) -> None:
    while not await check():
        await asyncio.sleep(every)


def lineage_awaits(handle: WorkflowHandle[Any, Any], cycle: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        s = await handle.query(LineageWorkflow.state)
        return s.status == "awaiting_score" and s.cycle == cycle

    return check


async def drive(
    handles: list[WorkflowHandle[Any, Any]],
    cycles: int,
    ready: Callable[[WorkflowHandle[Any, Any], int], Awaitable[object]],
    score: str,
) -> None:
    """Both sides alike: wait until every workflow awaits its score, score them all, repeat."""
    for cycle in range(1, cycles + 1):
        await asyncio.gather(*(ready(h, cycle) for h in handles))
        if cycle < cycles:
            await asyncio.gather(*(h.signal(score, {"score": 9}) for h in handles))


async def drive_lineages(
    client: Client,
    queue: str,
    lineages: int,
    cycles: int,
    poll: bool = False,
    started_out: list[WorkflowHandle[Any, Any]] | None = None,
) -> float:
    """Wall seconds; ``started_out`` receives the workflows' handles (both sides alike)."""
    spec = make_spec(labels=tuple(f"L{i}" for i in range(lineages)))
    started = time.perf_counter()
    handles = await start_session(client, spec, queue)
    if started_out is not None:
        started_out += handles

    async def ready(handle: WorkflowHandle[Any, Any], cycle: int) -> object:
        if poll:
            return await poll_until(lineage_awaits(handle, cycle))
        return await await_output(handle, cycle)

    await drive(handles, cycles, ready, "score")
    return time.perf_counter() - started


async def drive_bare(
    client: Client,
    queue: str,
    lineages: int,
    cycles: int,
    poll: bool = False,
    started_out: list[WorkflowHandle[Any, Any]] | None = None,
) -> float:
    started = time.perf_counter()
    handles = [
        await client.start_workflow(
            BareCycleWorkflow.run, cycles, id=f"bare-{uuid.uuid4()}", task_queue=queue
        )
        for _ in range(lineages)
    ]
    if started_out is not None:
        started_out += handles

    async def ready(handle: WorkflowHandle[Any, Any], cycle: int) -> object:
        if poll:

            async def check() -> bool:
                return await handle.query(BareCycleWorkflow.awaiting) == cycle

            return await poll_until(check)
        return await handle.execute_update(BareCycleWorkflow.await_output, cycle)

    await drive(handles, cycles, ready, "score")
    return time.perf_counter() - started


def peak_rss_mb(process: psutil.Process) -> float:
    """A process's peak resident set (VmHWM), in MB."""
    with open(f"/proc/{process.pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return process.memory_info().rss / 1024 / 1024


async def score_burst(
    handles: list[WorkflowHandle[Any, Any]],
    next_output: Callable[[WorkflowHandle[Any, Any]], Awaitable[object]],
) -> tuple[float, float, float, float]:
    """Score every workflow at once; each one's latency runs from the burst's start until its
    next output is awaiting a score. (p50, p95, max) seconds and cycles/s."""
    started = time.perf_counter()

    async def one(handle: WorkflowHandle[Any, Any]) -> float:
        await handle.signal("score", {"score": 9})
        await next_output(handle)
        return time.perf_counter() - started

    latencies = sorted(await asyncio.gather(*(one(h) for h in handles)))
    wall = time.perf_counter() - started
    p95 = statistics.quantiles(latencies, n=20)[18]
    return statistics.median(latencies), p95, latencies[-1], len(handles) / wall


async def bare_burst(client: Client, queue: str, count: int) -> tuple[float, float, float, float]:
    """The same burst on bare workflows (same activities, kinds and points) waiting for a
    score."""
    handles = [
        await client.start_workflow(
            BareCycleWorkflow.run, 3, id=f"bare-burst-{uuid.uuid4()}", task_queue=queue
        )
        for _ in range(count)
    ]
    await asyncio.gather(*(h.execute_update(BareCycleWorkflow.await_output, 1) for h in handles))
    return await score_burst(handles, lambda h: h.execute_update(BareCycleWorkflow.await_output, 2))


def burst_line(who: str, count: int, figures: tuple[float, float, float, float]) -> str:
    p50, p95, most, rate = figures
    return (
        f"{who}: {count} scores sent at once -> next output p50 {p50:.2f} s, p95 {p95:.2f} s, "
        f"max {most:.2f} s; {rate:.0f} lineage-cycles/s"
    )


class CpuMeter:
    """CPU seconds (user + system) of the Temporal server (our child processes) and of this
    process, around a run."""

    def __init__(self) -> None:
        self.me = psutil.Process()
        self.server = self.me.children(recursive=True)

    def now(self) -> tuple[float, float]:
        def cpu(p: psutil.Process) -> float:
            t = p.cpu_times()
            return t.user + t.system

        return sum(cpu(p) for p in self.server), cpu(self.me)

    async def measure(self, run: Awaitable[float]) -> tuple[float, float, float]:
        """(wall seconds, server CPU seconds, this process's CPU seconds)."""
        server, me = self.now()
        wall = await run
        server_after, me_after = self.now()
        return wall, server_after - server, me_after - me


async def main(lineages: int, cycles: int, rounds: int, poll: bool, burst: int) -> None:
    env = await start_in_memory()
    client = env.client
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        settings = Settings(
            task_queue=queue, database_url=str(store.engine.url), max_concurrent_activities=100
        )
        bare_q, free_q = f"{queue}-bare", f"{queue}-bare-unsandboxed"
        async with (
            build_worker(client, store, settings),
            Worker(client, task_queue=bare_q, workflows=[BareCycleWorkflow], activities=[noop]),
            Worker(
                client,
                task_queue=free_q,
                workflows=[BareCycleWorkflow],
                activities=[noop],
                workflow_runner=UnsandboxedWorkflowRunner(),
            ),
        ):
            # Part 1's third side: its worker (and the workflows it caches) is gone before the
            # memory figures of part 2.
            async with Worker(
                client,
                task_queue=f"{queue}-canned",
                workflows=[LineageWorkflow],
                activities=canned_activities.ALL,
                activity_executor=ThreadPoolExecutor(max_workers=8),
            ):
                # Warm all up (first imports into the workflow sandbox, first statements), then
                # alternate them: on two shared cores a single run of each says little.
                canned = f"{queue}-canned"
                await drive_lineages(client, queue, 20, 1)
                await drive_lineages(client, canned, 20, 1)
                await drive_bare(client, bare_q, 20, 1)
                await drive_bare(client, free_q, 20, 1)
                tune_garbage_collector()  # as a worker process does once started (worker.py)
                meter = CpuMeter()
                ours_m, bare_m, canned_m, free_m = [], [], [], []
                for _ in range(rounds):
                    bare_m.append(await meter.measure(drive_bare(client, bare_q, 20, cycles, poll)))
                    free_m.append(await meter.measure(drive_bare(client, free_q, 20, cycles, poll)))
                    ours_m.append(
                        await meter.measure(drive_lineages(client, queue, 20, cycles, poll))
                    )
                    canned_m.append(
                        await meter.measure(drive_lineages(client, canned, 20, cycles, poll))
                    )
                ours_runs, bare_runs = [m[0] for m in ours_m], [m[0] for m in bare_m]
                ours, bare = statistics.median(ours_runs), statistics.median(bare_runs)
                canned_wall = statistics.median(m[0] for m in canned_m)
                free = statistics.median(m[0] for m in free_m)
                # Each round's pair ran back to back: their ratio cancels the machine's slower
                # and faster minutes, which the medians of each side only average out.
                paired = [o / b for o, b in zip(ours_runs, bare_runs, strict=True)]

                def per_cycle(runs: list[tuple[float, float, float]], i: int) -> float:
                    return statistics.median(r[i] for r in runs) / (20 * cycles) * 1000

                print(
                    f"1. orchestration, 20 lineages x {cycles} cycles, median of {rounds} "
                    f"alternating runs: Training Camp {ours:.2f} s, bare workflows with the same "
                    f"activities {bare:.2f} s -> ratio {ours / bare:.2f} (target <= 1.3)\n"
                    f"   runs: ours {', '.join(f'{r:.2f}' for r in ours_runs)}; "
                    f"bare {', '.join(f'{r:.2f}' for r in bare_runs)}\n"
                    f"   each round's ratio: {', '.join(f'{r:.2f}' for r in paired)} "
                    f"(median {statistics.median(paired):.2f})\n"
                    f"   CPU per lineage-cycle (medians): Training Camp: Temporal server "
                    f"{per_cycle(ours_m, 1):.1f} ms, worker process {per_cycle(ours_m, 2):.1f} ms; "
                    f"bare: server {per_cycle(bare_m, 1):.1f} ms, worker process "
                    f"{per_cycle(bare_m, 2):.1f} ms\n"
                    f"   the lineage workflow under canned activities (bench/canned_activities.py: "
                    f"Temporal and the workflow's logic, no store, runner or trainer work): "
                    f"{canned_wall:.2f} s -> ratio {canned_wall / bare:.2f}; server "
                    f"{per_cycle(canned_m, 1):.1f} ms, worker process "
                    f"{per_cycle(canned_m, 2):.1f} ms\n"
                    f"   bare workflows outside the sandbox, as the lineage runs: {free:.2f} s -> "
                    f"Training Camp against them {ours / free:.2f}; server "
                    f"{per_cycle(free_m, 1):.1f} ms, worker process {per_cycle(free_m, 2):.1f} ms"
                )

            if lineages == 0:
                return
            t0 = time.perf_counter()
            handles = []
            for first in range(0, lineages, 25):  # sessions hold up to 26 lineages
                labels = tuple(f"M{i}" for i in range(first, min(first + 25, lineages)))
                handles += await start_session(client, make_spec(labels=labels), queue)

            if poll:
                await asyncio.gather(*(poll_until(lineage_awaits(h, 1)) for h in handles))
            else:
                await asyncio.gather(*(await_output(h, 1) for h in handles))
            print(
                f"2. {lineages} lineages started and awaiting a score in "
                f"{time.perf_counter() - t0:.1f} s"
            )
            latencies = []
            for handle in handles[:100]:
                sent = time.perf_counter()
                await handle.signal("score", {"score": 9})
                if poll:
                    await poll_until(lineage_awaits(handle, 2), every=0.005)
                else:
                    await await_output(handle, 2)
                latencies.append(time.perf_counter() - sent)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            q = statistics.quantiles(latencies, n=20)
            print(
                f"   score -> next output: p50 {statistics.median(latencies) * 1000:.0f} ms, "
                f"p95 {q[18] * 1000:.0f} ms (target <= 500 ms); worker process peak RSS "
                f"{rss:.0f} MB (target <= 500 MB)"
            )
            server_rss = sum(peak_rss_mb(p) for p in CpuMeter().server)
            print(
                f"   memory, every process: worker {rss:.0f} MB + Temporal dev server "
                f"{server_rss:.0f} MB = {rss + server_rss:.0f} MB peak RSS"
            )
            if burst:
                ours = await score_burst(handles[100 : 100 + burst], lambda h: await_output(h, 2))
                bare = await bare_burst(client, bare_q, burst)
                free = await bare_burst(client, free_q, burst)
                print(
                    f"3. burst (targets: p95 <= 4 s, >= 60/s)\n"
                    f"   {burst_line('Training Camp', burst, ours)}\n"
                    f"   {burst_line('bare workflows', burst, bare)}\n"
                    f"   {burst_line('bare workflows outside the sandbox', burst, free)}"
                )
        store.close()
    await env.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lineages", type=int, default=500)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--poll",
        action="store_true",
        help="drive both sides by polling their queries every 0.1 s instead of awaiting updates",
    )
    parser.add_argument(
        "--burst",
        type=int,
        default=200,
        help="after the load figures, score this many waiting lineages at once (0: skip)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.lineages, args.cycles, args.rounds, args.poll, args.burst))
