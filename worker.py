"""Run a Training Camp worker: the LineageWorkflow and every activity, on one task queue.

Workers are stateless; run as many as you like, on as many machines, against one store.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

import typer
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.worker import Interceptor, UnsandboxedWorkflowRunner, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.agent_execution import AgentExecutionActivities
from activities.cycle_records import CycleRecordActivities
from activities.error_classification import PermanentErrorInterceptor
from activities.feedback import FeedbackActivities
from activities.insight_sharing import InsightSharingActivities
from activities.lightning import LightningActivities
from activities.lineage_registry import LineageRegistryActivities
from activities.reading_preview import ReadingPreviewActivities
from activities.rlm import RlmActivities
from activities.trainer import TrainerActivities
from client import connect
from domain.settings import Settings
from runner.backends import ModelBackends
from runner.executor import Executor
from runner.telemetry import collector, runner_tracer, tracing_interceptor
from runner.tools import default_registry
from services import health
from store import Store
from trainer.backends import TrainerBackends
from workflows.lightning import (
    LightningServerWorkflow,
    OptimizationWorkflow,
    RolloutBatchWorkflow,
    RolloutDispatcherWorkflow,
)
from workflows.lineage import LineageWorkflow
from workflows.reading_preview import ReadingPreviewWorkflow
from workflows.rlm import RlmFanOutWorkflow, RlmReplWorkflow, RlmWorkerWorkflow


def build_worker(
    client: Client,
    store: Store,
    settings: Settings,
    task_queue: str | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Worker:
    if settings.anthropic_api_key is not None:
        # The SDK is imported on first use (runner/claude.py): a worker that may call Claude
        # loads it now, before it polls, so no activity stalls the event loop for the second
        # the import takes (a heartbeat timeout can be 1 s).
        import anthropic  # noqa: F401
    backends = ModelBackends(settings)
    executor = Executor(backends.for_model, default_registry(), runner_tracer(), collector())
    agent = AgentExecutionActivities(store, executor)
    registry = LineageRegistryActivities(store)
    trainers = TrainerBackends(settings)
    trainer = TrainerActivities(store, trainers, settings.shared_corrections)
    reading = ReadingPreviewActivities(
        store, trainers, settings.shared_corrections, planner=trainer.planned
    )
    feedback = FeedbackActivities(store)
    records = CycleRecordActivities(store)
    sharing = InsightSharingActivities(store)
    lightning = LightningActivities(store, trainers)
    rlm = RlmActivities(store, settings)
    # Clients made by connect() already trace (and workers inherit that); others get it here.
    add_tracing = settings.temporal_tracing and not any(
        isinstance(i, TracingInterceptor) for i in client.config()["interceptors"]
    )
    return Worker(
        client,
        task_queue=task_queue or settings.task_queue,
        interceptors=[
            *([tracing_interceptor()] if add_tracing else []),
            PermanentErrorInterceptor(),
            *interceptors,
        ],
        workflows=[
            LineageWorkflow,
            ReadingPreviewWorkflow,
            LightningServerWorkflow,
            RolloutBatchWorkflow,
            RolloutDispatcherWorkflow,
            OptimizationWorkflow,
            RlmWorkerWorkflow,
            RlmFanOutWorkflow,
            RlmReplWorkflow,
        ],
        activities=[
            registry.register_lineage,
            agent.run_agent,
            agent.mark_rollout_failed,
            feedback.record_rejection,
            feedback.record_directive,
            feedback.record_lock,
            feedback.record_promotion,
            feedback.record_rater_score,
            trainer.take_cycle_step,
            reading.preview_reading,
            records.record_cycle_step,
            records.record_correction,
            sharing.share_outcome,
            lightning.publish_resources,
            lightning.store_samples,
            lightning.store_tasks,
            lightning.claim_tasks,
            lightning.record_task_attempts_started,
            lightning.record_task_attempts_failed,
            lightning.record_task_reports,
            lightning.propose_template,
            rlm.rlm_analyze,
            rlm.rlm_apply_commit,
            rlm.store_context,
            rlm.model_turn,
            rlm.llm_query,
            rlm.run_cell,
            rlm.export_commit,
        ],
        # LineageWorkflow is defined unsandboxed (see its definition); `workflow_sandbox` runs
        # it in the sandbox like the others.
        unsandboxed_workflow_runner=(
            SandboxedWorkflowRunner() if settings.workflow_sandbox else UnsandboxedWorkflowRunner()
        ),
        # Store activities are synchronous (SQLAlchemy) and run on this pool, local ones (the
        # lineage's store steps) too: room for both limits, so a queued local activity never
        # spends its timeout waiting for a thread.
        activity_executor=ThreadPoolExecutor(max_workers=2 * settings.max_concurrent_activities),
        max_concurrent_activities=settings.max_concurrent_activities,
        max_concurrent_local_activities=settings.max_concurrent_activities,
        max_cached_workflows=settings.max_cached_workflows,
        max_concurrent_workflow_task_polls=settings.workflow_task_pollers,
        max_concurrent_activity_task_polls=settings.activity_task_pollers,
    )


# Python's cyclic garbage collector, left at its defaults (a young-generation pass every 700
# allocations), spent about a tenth of a busy worker's CPU: every pass walks the objects a
# cycle allocates, and the older passes walk everything the process imported. Young passes
# every 10,000 allocations, and the start-up heap frozen out of every pass, cut that about
# sixfold (bench/lineage_load.py, a burst of 200 scores); memory stays within its figure.
GC_YOUNG_THRESHOLD = 10_000


def tune_garbage_collector() -> None:
    """For a long-running worker process, once its modules are imported and its worker built."""
    gc.collect()
    gc.freeze()  # what start-up made lives as long as the process: never walk it again
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


async def run_worker(
    settings: Settings,
    metrics_port: int | None = None,
    health_port: int | None = None,
    health_host: str = health.DEFAULT_HOST,
    metrics_host: str = health.DEFAULT_HOST,
) -> None:
    store = Store.open(settings.database_url)
    runtime = None
    if metrics_port is not None:  # Temporal's SDK metrics, for Prometheus to scrape
        # loopback unless told, like /healthz: the metrics name task queues and workflow types
        runtime = Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(bind_address=_bind_address(metrics_host, metrics_port))
            )
        )
    client = await connect(settings, runtime)
    worker = build_worker(client, store, settings)
    tune_garbage_collector()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    logging.info(
        "worker on task queue %r, store %s",
        settings.task_queue,
        store.engine.url.render_as_string(hide_password=True),
    )
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(worker)
        if health_port is not None:
            await stack.enter_async_context(
                health.HealthServer(health_port, store, lambda: not stop.is_set(), health_host)
            )
        print("worker ready", flush=True)
        await stop.wait()
        logging.info("stopping: running activities finish first")
    store.close()


def _bind_address(host: str, port: int) -> str:
    """``host:port`` as the SDK's Prometheus exporter takes it (an IPv6 host in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


app = typer.Typer(add_completion=False, help=__doc__)


@app.command()
def main_command(
    task_queue: Annotated[
        str | None, typer.Option(help="Task queue (default: $TRAINING_CAMP_TASK_QUEUE).")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus metrics on this port.")
    ] = None,
    health_port: Annotated[
        int | None, typer.Option(help="Serve GET /healthz on this port.")
    ] = None,
    health_host: Annotated[
        str,
        typer.Option(
            help="Address /healthz listens on: loopback unless a probe comes from outside "
            "(Kubernetes: the pod's IP).",
            envvar="TRAINING_CAMP_HEALTH_HOST",
        ),
    ] = health.DEFAULT_HOST,
    metrics_host: Annotated[
        str,
        typer.Option(
            help="Address the metrics listen on: loopback unless a scraper comes from outside "
            "(Kubernetes: the pod's IP).",
            envvar="TRAINING_CAMP_METRICS_HOST",
        ),
    ] = health.DEFAULT_HOST,
) -> None:
    """Run a worker until SIGINT/SIGTERM (graceful: running activities finish)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    settings = Settings.from_env()
    if task_queue:
        settings = settings.model_copy(update={"task_queue": task_queue})
    asyncio.run(run_worker(settings, metrics_port, health_port, health_host, metrics_host))


def main() -> None:
    code = 0
    try:
        app()
    except SystemExit as exc:
        code = int(exc.code or 0)
    # Avoid the interpreter-exit abort of short-lived Temporal clients (sdk-python#300).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
