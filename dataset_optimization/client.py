"""Client SDK: a Temporal worker on the rollouts task queue that runs the user's agent.

    async def agent(task: dict, resources: Resources) -> Rollout | float: ...
    await AgentLightningClient(temporal_client, client_id="gpu-1", store=store).run(agent)

Tasks arrive by id; the client reads their samples from the store (the server's database:
``store``, or ``settings.database_url``), a few tasks in one read, samples kept by hash.
Resources are fetched separately from tasks (a query to the workflow that publishes them) and
cached by version, so each client fetches each version once. With ``automatic_trace`` the
``resources.llm`` the agent calls is traced by the runner's tracer, which fills the report's
triplets and trace_data.
"""

from __future__ import annotations

import asyncio
import copy
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from activities.heartbeat import Heartbeat
from domain.lightning import (
    LLM,
    MAX_REPORT_BYTES,
    ClientAssignment,
    ClientBatch,
    ClientBatchReport,
    ClientReport,
    PromptTemplate,
    ResourceSet,
)
from domain.rollout_report import RolloutReport
from domain.settings import Settings
from runner import tracer as attr
from runner.adapter import to_trace_data, to_triplets
from runner.backends import ModelBackends
from runner.model_backend import ChatMessage, ModelRequest
from runner.pricing import estimate_cost
from runner.telemetry import collector, runner_tracer
from runner.tracer import AgentTracer, set_if
from store import Store

DEFAULT_ROLLOUT_QUEUE = "lightning-rollouts"
HEARTBEAT_EVERY_SECONDS = 10.0  # when the activity sets no heartbeat timeout
Agent = Callable[[dict[str, Any], "Resources"], Awaitable["RolloutReport | float"]]


class ResourceCache:
    """Resource sets by (publisher, version): fetched once each, then served from memory."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._sets: dict[tuple[str, int], ResourceSet] = {}
        self._locks: dict[tuple[str, int], asyncio.Lock] = {}
        self.fetches = 0
        self.hits = 0

    async def get(self, workflow_id: str, version: int) -> ResourceSet:
        key = (workflow_id, version)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # concurrent tasks for a new version fetch it once
            if key in self._sets:
                self.hits += 1
                return self._sets[key]
            handle = self._client.get_workflow_handle(workflow_id)
            found = await handle.query("resources", version, result_type=ResourceSet)
            self.fetches += 1
            self._sets[key] = found
            return found


@dataclass(frozen=True, slots=True)
class QueuedTask:
    """A task as the client runs it: its sample and the resource version it was queued with."""

    rollout_id: str
    sample: dict[str, Any]
    resources_workflow_id: str
    resources_version: int


class TaskReader:
    """Tasks read from the store by id, a client activity's few in one read; samples kept by
    content hash up to ``max_bytes`` (read-through: a dataset runs again every iteration)."""

    def __init__(self, store: Store, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._samples: OrderedDict[str, tuple[dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # activities read in threads of their own
        self.reads = 0  # samples read from the store (the rest came from the cache)

    def read(self, rollout_ids: list[str]) -> dict[str, QueuedTask]:
        rows = self.store.queries.queued_tasks(rollout_ids)
        sizes = {r.sample_hash: r.sample_bytes for r in rows.values()}
        with self._lock:
            found = {d: self._samples[d][0] for d in sizes if d in self._samples}
            for digest in found:
                self._samples.move_to_end(digest)
        missing = sorted(sizes.keys() - found.keys())
        if missing:
            read = self.store.queries.payloads(missing)
            with self._lock:
                for digest, sample in read.items():
                    self._keep(digest, sample, sizes[digest])
                self.reads += len(missing)
            found.update(read)
        tasks = {}
        for rollout_id, row in rows.items():
            sample = found[row.sample_hash]
            tasks[rollout_id] = QueuedTask(
                rollout_id=rollout_id,
                sample=copy.deepcopy(sample),  # the agent may change its task
                resources_workflow_id=row.resources_workflow_id,
                resources_version=row.resources_version,
            )
        return tasks

    def _keep(self, digest: str, sample: dict[str, Any], size: int) -> None:
        if size > self.max_bytes or digest in self._samples:
            return
        self._samples[digest] = (sample, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, dropped) = self._samples.popitem(last=False)
            self._bytes -= dropped


class TracedLLM:
    """The LLM resource, callable by the agent; every call is an llm_call span."""

    def __init__(self, llm: LLM, backends: ModelBackends, tracer: AgentTracer | None) -> None:
        self.resource = llm
        self._backends = backends
        self._tracer = tracer
        self.prompt_tokens = self.completion_tokens = 0
        self.cost = 0.0

    async def complete(self, prompt: str, system: str = "") -> str:
        params = self.resource.sampling_params
        request = ModelRequest(
            model=self.resource.model,
            system=system,
            messages=[ChatMessage(role="user", content=prompt)],
            max_tokens=int(params.get("max_tokens", 1024)),
            temperature=float(params.get("temperature", 0.7)),
            top_p=params.get("top_p"),
        )
        backend = self._backends.for_model(self.resource.model)
        if self._tracer is None:
            reply = await backend.complete(request)
        else:
            with self._tracer.span(
                "llm_call",
                f"chat {self.resource.model}",
                **{
                    attr.OPERATION: "chat",
                    attr.REQUEST_MODEL: self.resource.model,
                    attr.REQUEST_MAX_TOKENS: request.max_tokens,
                    attr.INPUT: prompt,
                },
            ) as span:
                reply = await backend.complete(request)
                set_if(
                    span,
                    **{
                        attr.RESPONSE_MODEL: reply.model,
                        attr.OUTPUT: reply.text,
                        attr.INPUT_TOKENS: reply.prompt_tokens,
                        attr.OUTPUT_TOKENS: reply.completion_tokens,
                        attr.COST: estimate_cost(
                            reply.model, reply.prompt_tokens, reply.completion_tokens
                        ),
                    },
                )
        self.prompt_tokens += reply.prompt_tokens
        self.completion_tokens += reply.completion_tokens
        self.cost += estimate_cost(reply.model, reply.prompt_tokens, reply.completion_tokens) or 0
        return reply.text


class Resources:
    """What the agent function receives: the version and its named resources."""

    def __init__(self, resource_set: ResourceSet, llm: TracedLLM | None) -> None:
        self.version = resource_set.version
        self.all = resource_set.resources
        self.llm = llm

    def template(self, name: str = "prompt_template") -> PromptTemplate:
        found = self.all.get(name)
        if not isinstance(found, PromptTemplate):
            raise KeyError(f"no prompt template named {name!r} in version {self.version}")
        return found


def _bounded(batch: ClientBatchReport) -> ClientBatchReport:
    """Under Temporal's payload limit: the heaviest traces are dropped first, reports kept."""
    while len(batch.model_dump_json()) > MAX_REPORT_BYTES:
        heavy = [r for r in batch.reports if r is not None and (r.spans or r.report.trace_data)]
        if not heavy:
            break
        r = max(heavy, key=lambda r: len(r.model_dump_json()))
        r.report.trace_data, r.spans = None, []
        r.report.logs = [*(r.report.logs or []), "trace_data dropped: report too large"]
    return batch


class AgentLightningClient:
    def __init__(
        self,
        client: Client,
        client_id: str,
        task_queue: str = DEFAULT_ROLLOUT_QUEUE,
        automatic_trace: bool = True,
        settings: Settings | None = None,
        store: Store | None = None,
    ) -> None:
        """``store``: the server's store, where tasks wait (by default the database at
        ``settings.database_url``, opened here)."""
        self.client = client
        self.client_id = client_id
        self.task_queue = task_queue
        self.automatic_trace = automatic_trace
        self.cache = ResourceCache(client)
        settings = settings or Settings.from_env()
        self._backends = ModelBackends(settings)
        self.store = store or Store.open(settings.database_url)
        self.tasks = TaskReader(self.store)
        self.completed = 0

    def worker(self, agent: Agent, max_concurrent: int = 4) -> Worker:
        """A worker taking tasks: ``max_concurrent`` rollouts run at once, whether tasks come
        one per activity or a few (``execute_rollouts``, from batches queued together)."""
        slots = asyncio.Semaphore(max_concurrent)

        async def one(task: QueuedTask | None, assignment: ClientAssignment) -> ClientReport:
            if task is None:
                raise LookupError(
                    f"task {assignment.rollout_id!r} is not in this client's store: does it "
                    "read the server's database (TRAINING_CAMP_DATABASE_URL)?"
                )
            async with slots:
                return await self._execute(agent, task, assignment.attempt)

        @activity.defn(name="execute_rollouts")
        async def execute_rollouts(batch: ClientBatch) -> ClientBatchReport:
            ids = [a.rollout_id for a in batch.assignments]
            # this client is alive while its tasks run: three beats a timeout. The first waits
            # an interval (Temporal counts the timeout from the start): a beat is a server
            # write, and most activities end long before one is due
            async with Heartbeat(HEARTBEAT_EVERY_SECONDS, per_timeout=3):
                tasks = await asyncio.to_thread(self.tasks.read, ids)
                done = await asyncio.gather(
                    *(one(tasks.get(a.rollout_id), a) for a in batch.assignments),
                    return_exceptions=True,
                )
            reports = [d if isinstance(d, ClientReport) else None for d in done]
            errors = [
                None if isinstance(d, ClientReport) else f"{type(d).__name__}: {d}" for d in done
            ]
            return _bounded(ClientBatchReport(reports=reports, errors=errors))

        return Worker(
            self.client,
            task_queue=self.task_queue,
            activities=[execute_rollouts],
            max_concurrent_activities=max_concurrent,
            activity_executor=ThreadPoolExecutor(max_concurrent),
        )

    async def run(self, agent: Agent, max_concurrent: int = 4) -> None:
        """Take tasks until cancelled."""
        async with self.worker(agent, max_concurrent):
            await asyncio.Event().wait()

    async def _execute(self, agent: Agent, task: QueuedTask, attempt: int) -> ClientReport:
        resource_set = await self.cache.get(task.resources_workflow_id, task.resources_version)
        attempt_id = f"{task.rollout_id}:a{attempt}"
        tracer = (
            AgentTracer(runner_tracer(), attempt_id, "training-camp-client")
            if self.automatic_trace
            else None
        )
        llm_resource = next(
            (r for r in resource_set.resources.values() if isinstance(r, LLM)), None
        )
        llm = TracedLLM(llm_resource, self._backends, tracer) if llm_resource else None
        started = time.perf_counter()
        try:
            result = await agent(task.sample, Resources(resource_set, llm))
        finally:
            spans = collector().drain(attempt_id)
        report = (
            result.model_copy(update={"rollout_id": task.rollout_id})
            if isinstance(result, RolloutReport)
            else RolloutReport(rollout_id=task.rollout_id, final_reward=float(result))
        )
        if spans and report.triplets is None:
            report.triplets = to_triplets(spans)
        if spans and report.trace_data is None:
            report.trace_data = to_trace_data(spans, service=f"client-{self.client_id}")
        report.metrics.update(
            {
                "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                "resource_fetches": float(self.cache.fetches),
                "resource_cache_hits": float(self.cache.hits),
                "prompt_tokens": float(llm.prompt_tokens if llm else 0),
                "completion_tokens": float(llm.completion_tokens if llm else 0),
                "estimated_cost": round(llm.cost, 8) if llm else 0.0,
            }
        )
        out = ClientReport(report=report, client_id=self.client_id, spans=spans)
        if len(out.model_dump_json()) > MAX_REPORT_BYTES:
            # Temporal refuses payloads over 2 MB: keep the report, drop the heavy trace.
            out.report.trace_data, out.spans = None, []
            out.report.logs = [*(out.report.logs or []), "trace_data dropped: report too large"]
        self.completed += 1
        return out
