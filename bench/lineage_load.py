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
2. Load: 500 lineages (``--lineages``) started, ``--parallel`` sessions of 25 at a time, until
   every one awaits a score on one worker: the time that took, lineages/s, and the CPU of a
   lineage's first cycle (Temporal server, this process). A session is done when the store holds
   each of its lineages' first output and Temporal shows no task pending for any of them
   (``FirstOutputs``: reads only; ``--await-output``: an `await_output` update to each lineage
   instead, which costs it a workflow task of its own); at the end the `state` query of 100
   lineages not scored, drawn at random, checks that they all await their first score. Then
   score -> next output latency (signal sent until `await_output` returns the next cycle;
   ``--poll``: until the `state` query, polled every 5 ms, shows it) for 100 lineages
   (``--sample``) one after another, among them lineages evicted from the worker's workflow
   cache (``--cache``) when there are more lineages than it holds; this process's peak RSS
   (worker + client) and the Temporal dev server's. Targets: 500 lineages: <= 500 MB, p95
   <= 0.5 s. 10,000 (``--lineages 10000 --rounds 0 --burst 0 --parallel 8 --server-file --cache
   250``, the worker settings deploy/README.md gives for many mostly idle lineages): all waiting
   in <= 4 minutes, worker <= 600 MB, dev server <= 700 MB, p95 <= 250 ms across evicted
   lineages. ``--rounds 0`` skips part 1.
3. Burst: 200 more of them scored at once (``--burst``): p50 / p95 / max of score -> next
   output, and lineage-cycles/s; then the same burst of bare workflows (in the sandbox and
   outside it), the ceiling that Temporal, its Python SDK and this machine set. Targets:
   p95 <= 4 s, >= 60 cycles/s.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
from sqlmodel import col, select
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import WorkflowExecutionStatus
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import (
    Client,
    WorkflowHandle,
)
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from bench import canned_activities
from bench.bare_workflow import BareCycleWorkflow, noop
from client import await_output, start_session
from domain.settings import Settings
from services import dev_server
from services.dev_server import start_in_memory
from store import Store
from store.tables import ArtifactRow
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


STALLED_AFTER_SECONDS = 60.0


class FirstOutputs:
    """Tells when a session's lineages await their first score without loading them: a
    lineage does once the store holds its first output (its agent run's) and Temporal shows
    neither an activity nor a workflow task pending for it: the workflow task that took the
    run's result, in which the lineage turns to `awaiting_score`, has completed. The store is
    read once every ``every`` seconds for all the lineages waited on (one query of the
    bench's store, in this process); once a session's outputs are all in, each of its
    lineages is described (DescribeWorkflowExecution, a read of the workflow's state) until
    it shows no pending task. An `await_output` update instead costs every lineage a
    workflow task and five history events of its own."""

    def __init__(self, client: Client, store: Store, every: float = 0.2) -> None:
        self.client, self.store, self.every = client, store, every
        self.outputs: dict[str, asyncio.Future[None]] = {}  # lineage id -> output in
        self.describes = 0
        self._poller: asyncio.Task[None] | None = None

    async def wait(self, handles: list[WorkflowHandle[Any, Any]]) -> None:
        loop = asyncio.get_running_loop()
        waited = []
        for handle in handles:
            waited.append(loop.create_future())
            self.outputs[handle.id.removeprefix("lineage-")] = waited[-1]
        if self._poller is None or self._poller.done():
            self._poller = asyncio.create_task(self._poll())
        outputs = asyncio.gather(*waited)
        while True:  # a lineage whose rollout failed has no output: say so instead of waiting
            done, _ = await asyncio.wait([outputs], timeout=STALLED_AFTER_SECONDS)
            if done:
                break
            for handle, future in zip(handles, waited, strict=True):
                if not future.done():
                    state = await handle.query(LineageWorkflow.state)
                    if state.status in ("failed", "stopped", "completed"):
                        raise RuntimeError(f"{handle.id} is {state.status}: {state.last_error}")
        await outputs
        pending = [WorkflowExecution(workflow_id=h.id, run_id=h.result_run_id) for h in handles]
        while True:
            settled = await asyncio.gather(*(self._settled(run) for run in pending))
            pending = [run for run, done in zip(pending, settled, strict=True) if not done]
            if not pending:
                return
            await asyncio.sleep(self.every / 2)

    async def _poll(self) -> None:
        try:
            while self.outputs:
                await asyncio.sleep(self.every)
                for lineage_id in await asyncio.to_thread(self._with_output, list(self.outputs)):
                    self.outputs.pop(lineage_id).set_result(None)
        except BaseException as exc:  # every waiter hears of it, not only this task
            for future in self.outputs.values():
                future.set_exception(exc)
            raise

    def _with_output(self, lineage_ids: list[str]) -> list[str]:
        """Which of these lineages have their first output in the store."""
        a = ArtifactRow
        query = select(a.lineage_id).where(col(a.lineage_id).in_(lineage_ids), a.cycle == 1)
        with self.store.read_engine.connect() as db:
            return list(db.execute(query).scalars())

    async def _settled(self, run: WorkflowExecution) -> bool:
        """Whether the run (named by its id: the server need not look the current one up)
        has no task pending."""
        self.describes += 1
        described = await self.client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(namespace=self.client.namespace, execution=run)
        )
        info = described.workflow_execution_info
        if info.status != WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING:
            raise RuntimeError(f"{run.workflow_id} ended: {info.status}")
        return not described.pending_activities and not described.HasField("pending_workflow_task")


async def start_waiting(
    client: Client,
    queue: str,
    lineages: int,
    parallel: int,
    first_outputs: FirstOutputs | None,
) -> list[WorkflowHandle[Any, Any]]:
    """Start ``lineages`` lineages, in sessions of 25 (a session holds up to 26), ``parallel``
    sessions at a time, each session done when all its lineages await their first score
    (seen by ``first_outputs``; without it, by an `await_output` update sent to each).
    The handles in the order their sessions started."""
    sessions: list[list[WorkflowHandle[Any, Any]]] = [[] for _ in range(0, lineages, 25)]
    gate = asyncio.Semaphore(parallel)

    async def session(index: int) -> None:
        first = index * 25
        spec = make_spec(labels=tuple(f"M{i}" for i in range(first, min(first + 25, lineages))))
        async with gate:
            handles = await start_session(client, spec, queue)
            sessions[index] = handles
            if first_outputs is not None:
                await first_outputs.wait(handles)
            else:
                await asyncio.gather(*(first_output(h) for h in handles))

    async def first_output(handle: WorkflowHandle[Any, Any]) -> None:
        await await_output(handle, 1)  # the state it returns is dropped: the driver holds
        # only handles, so that the process's memory is the worker's

    await asyncio.gather(*(session(i) for i in range(len(sessions))))
    return [h for handles in sessions for h in handles]


async def all_awaiting(handles: list[WorkflowHandle[Any, Any]], count: int) -> int:
    """The `state` query of ``count`` lineages drawn at random: how many await their first
    score (all of them, when the way part 2 told that they did is right)."""
    picked = random.sample(handles, min(count, len(handles)))
    states = await asyncio.gather(*(h.query(LineageWorkflow.state) for h in picked))
    return sum(s.status == "awaiting_score" and s.cycle == 1 for s in states)


async def score_to_next_output(handles: list[WorkflowHandle[Any, Any]], poll: bool) -> list[float]:
    """One after another: a score sent, until the lineage's next output awaits a score."""
    latencies = []
    for handle in handles:
        sent = time.perf_counter()
        await handle.signal("score", {"score": 9})
        if poll:
            await poll_until(lineage_awaits(handle, 2), every=0.005)
        else:
            await await_output(handle, 2)
        latencies.append(time.perf_counter() - sent)
    return latencies


def latency_line(latencies: list[float]) -> str:
    q = statistics.quantiles(latencies, n=20)
    return (
        f"p50 {statistics.median(latencies) * 1000:.0f} ms, p95 {q[18] * 1000:.0f} ms, "
        f"max {max(latencies) * 1000:.0f} ms"
    )


async def load(
    client: Client,
    queue: str,
    settings: Settings,
    store: Store,
    lineages: int,
    parallel: int,
    sample: int,
    poll: bool,
    by_update: bool,
) -> list[WorkflowHandle[Any, Any]]:
    """Part 2; returns the lineages not scored yet, in the order they started."""
    meter = CpuMeter()
    server_cpu, me_cpu = meter.now()
    first_outputs = None if by_update else FirstOutputs(client, store)
    t0 = time.perf_counter()
    handles = await start_waiting(client, queue, lineages, parallel, first_outputs)
    wall = time.perf_counter() - t0
    server_after, me_after = meter.now()
    if first_outputs is None:
        told = "each lineage's await_output update returned"
    else:
        told = (
            "the store held each one's output and Temporal showed no task pending: "
            f"{first_outputs.describes / lineages:.2f} describes a lineage"
        )
    print(
        f"2. {lineages} lineages started and awaiting a score in {wall:.1f} s "
        f"({lineages / wall:.1f} lineages/s; {parallel} sessions of 25 at a time; {told}); "
        f"CPU per lineage's first cycle (start -> awaiting its score): Temporal server "
        f"{(server_after - server_cpu) / lineages * 1000:.1f} ms, worker process "
        f"{(me_after - me_cpu) / lineages * 1000:.1f} ms"
    )
    cache = settings.max_cached_workflows
    evicted = handles[: max(0, lineages - cache - sample)]  # the least recently used
    scored: set[int] = set()
    if len(evicted) >= sample:
        step = len(evicted) / sample
        picked = [evicted[int(i * step)] for i in range(sample)]
        latencies = await score_to_next_output(picked, poll)
        scored |= {id(h) for h in picked}
        print(
            f"   score -> next output, {sample} lineages evicted from the worker's cache "
            f"({cache} lineages) one after another: {latency_line(latencies)} "
            "(target p95 <= 250 ms)"
        )
    cached = handles[-min(sample, cache // 2) :] if evicted else handles[:sample]
    latencies = await score_to_next_output(cached, poll)
    scored |= {id(h) for h in cached}
    print(
        f"   score -> next output, {len(cached)} lineages in the worker's cache: "
        f"{latency_line(latencies)} (target p95 <= 500 ms)"
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    server_rss = sum(peak_rss_mb(p) for p in meter.server)
    print(
        f"   peak RSS: worker process {rss:.0f} MB (target <= 500 MB for 500 lineages, "
        f"<= 600 MB for 10,000), Temporal dev server {server_rss:.0f} MB (<= 700 MB for "
        f"10,000); {rss + server_rss:.0f} MB together"
    )
    waiting = [h for h in handles if id(h) not in scored]
    # after the latency figures, so that the lineages read do not join the worker's cache first
    checked = min(100, len(waiting))
    awaiting = await all_awaiting(waiting, checked)
    print(
        f"   `state` of {checked} lineages not scored, drawn at random: {awaiting} awaiting "
        "their first score"
    )
    if awaiting != checked:
        raise RuntimeError("a lineage told as awaiting its score was not")
    return waiting


async def overhead(
    client: Client, queue: str, bare_q: str, free_q: str, cycles: int, rounds: int, poll: bool
) -> None:
    """Part 1."""
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
            ours_m.append(await meter.measure(drive_lineages(client, queue, 20, cycles, poll)))
            canned_m.append(await meter.measure(drive_lineages(client, canned, 20, cycles, poll)))
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


# The dev server's settings are services/dev_server.py's, as `training-camp demo` runs it
# (--dev-server-defaults: without the cached search attributes; --server-file: its database in
# a file in write-ahead-log mode, as the demo keeps it).


async def main(
    lineages: int,
    cycles: int,
    rounds: int,
    poll: bool,
    burst: int,
    parallel: int,
    sample: int,
    cache: int | None,
    dev_server_defaults: bool,
    server_file: bool,
    by_update: bool,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = await start_in_memory(
            dev_server_extra_args=[
                *([] if dev_server_defaults else dev_server.CACHED_SEARCH_ATTRIBUTES),
                *(dev_server.ON_DISK if server_file else []),
            ],
            dev_server_database_filename=f"{tmp}/temporal.db" if server_file else None,
        )
        client = env.client
        store = Store.open(f"sqlite:///{tmp}/bench.db")
        queue = f"bench-{uuid.uuid4().hex[:8]}"
        settings = Settings(
            task_queue=queue, database_url=str(store.engine.url), max_concurrent_activities=100
        )
        if cache is not None:
            settings = settings.model_copy(update={"max_cached_workflows": cache})
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
            if rounds:
                await overhead(client, queue, bare_q, free_q, cycles, rounds, poll)
            else:  # warm up as part 1 does
                await drive_lineages(client, queue, 20, 1)
                tune_garbage_collector()
            if lineages == 0:
                return
            waiting = await load(
                client, queue, settings, store, lineages, parallel, sample, poll, by_update
            )
            if burst:
                ours = await score_burst(waiting[:burst], lambda h: await_output(h, 2))
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
    parser.add_argument(
        "--parallel",
        type=int,
        default=4,
        help="part 2: start this many sessions (of 25 lineages) at a time",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=100,
        help="part 2: score this many lineages one after another for the latency figures",
    )
    parser.add_argument(
        "--cache",
        type=int,
        default=None,
        help="the worker's workflow cache, in lineages (default: the worker's default)",
    )
    parser.add_argument(
        "--dev-server-defaults",
        action="store_true",
        help="run the dev server as `temporal server start-dev` does (search attributes re-read "
        "at every use)",
    )
    parser.add_argument(
        "--server-file",
        action="store_true",
        help="the dev server keeps its SQLite database in a file (as `training-camp demo` runs "
        "it), not in memory",
    )
    parser.add_argument(
        "--await-output",
        action="store_true",
        help="part 2: tell that a lineage awaits its first score by its await_output update "
        "(a workflow task and five history events more per lineage) instead of reading the "
        "store and describing the workflow",
    )
    args = parser.parse_args()
    asyncio.run(
        main(
            args.lineages,
            args.cycles,
            args.rounds,
            args.poll,
            args.burst,
            args.parallel,
            args.sample,
            args.cache,
            args.dev_server_defaults,
            args.server_file,
            args.await_output,
        )
    )
