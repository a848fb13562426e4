"""The client library: connect to Temporal, start a session's lineages, wait for an output,
read a lineage's state, and read its outputs and its prompt's provenance from a store. The CLI
(``starter.py``), the review inbox, the examples, the benches and the tests all go through it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ApplicationError
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from codec.encryption import codec_from_env, data_converter
from domain import search_attributes
from domain.checks import OutputChecks
from domain.execution import CUT_OFF
from domain.feedback import CorrectionTaken
from domain.lineage import LineageInput, LineageState
from domain.settings import Settings
from domain.spec import SessionSpec
from domain.trainer import SegmentProvenance
from runner.telemetry import tracing_interceptor
from workflows.lineage import LineageWorkflow

if TYPE_CHECKING:  # the store is the caller's: the library opens none
    from store import Store

log = logging.getLogger(__name__)
LineageHandle = WorkflowHandle[LineageWorkflow, object]


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """A client for ``settings``' Temporal; payloads are encrypted when a key is configured
    (every client and worker alike)."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(codec_from_env()),
        interceptors=[tracing_interceptor()] if settings.temporal_tracing else [],
        runtime=runtime,
    )


def workflow_id(lineage_id: str) -> str:
    """A lineage's workflow id: ``lineage-<lineage id>``."""
    return f"lineage-{lineage_id}"


async def ensure_search_attributes(client: Client) -> None:
    """Register our search attributes if the namespace lacks them (dev server or cluster)."""
    namespace = client.namespace
    try:
        existing = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        missing = {
            key.name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
            for key in search_attributes.ALL
            if key.name not in existing.custom_attributes
        }
        if missing:
            await client.operator_service.add_search_attributes(
                AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
            )
    except RPCError as exc:
        log.warning(
            "could not check search attributes (%s); ask your Temporal operator to add "
            "TrainingCampSession, TrainingCampLineage and TrainingCampStatus (Keyword)",
            exc.message,
        )


async def start_session(client: Client, spec: SessionSpec, task_queue: str) -> list[LineageHandle]:
    """Start every lineage of ``spec``; a lineage already running is resumed, not restarted.
    A worker on ``task_queue`` sharing ``client`` (the demo's) takes a lineage's first
    workflow task with the start call's answer (eager start) instead of through the queue."""
    await ensure_search_attributes(client)
    handles = []
    for lineage in spec.lineages:
        lineage_id = spec.lineage_id(lineage.label)
        handle = await client.start_workflow(
            LineageWorkflow.run,
            LineageInput(
                session_id=spec.session_id,
                session_name=spec.name,
                lineage_id=lineage_id,
                label=lineage.label,
                options=lineage.options,
                initial_agent=lineage.agent,
                inputs=spec.inputs,
                documents=spec.loaded_documents,
            ),
            id=workflow_id(lineage_id),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            request_eager_start=True,
            # "running" from the start (the workflow reads it back; continue-as-new carries it
            # over): a lineage's first cycle writes nothing to visibility
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(search_attributes.SESSION, spec.session_id),
                    SearchAttributePair(search_attributes.LINEAGE, lineage_id),
                    SearchAttributePair(search_attributes.STATUS, "running"),
                ]
            ),
        )
        handles.append(handle)
    return handles


async def await_output(handle: LineageHandle, cycle: int) -> LineageState:
    """Block until cycle ``cycle``'s output awaits its score (or the lineage stops or fails),
    without polling; asks again when a run continues as new meanwhile."""
    while True:
        state = await handle.execute_update(LineageWorkflow.await_output, cycle)
        if state.cycle >= cycle or state.status in ("failed", "stopped", "completed"):
            return state


async def _lineage_handle(settings: Settings, lineage: str) -> LineageHandle:
    """The workflow of a lineage named by its id or its workflow id."""
    client = await connect(settings)
    return client.get_workflow_handle(workflow_id(lineage.removeprefix("lineage-")))


async def correct_reading(
    settings: Settings, lineage: str, wants: list[str], rater: str
) -> CorrectionTaken:
    """Correct how the lineage's last score was read (its id or workflow id): ValueError with
    the lineage's reason when it refuses (an unknown family, nothing scored yet)."""
    handle = await _lineage_handle(settings, lineage)
    try:
        return await handle.execute_update(
            LineageWorkflow.correct_reading, {"wants": wants, "rater": rater}
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise ValueError(reason) from None


async def last_reading(settings: Settings, lineage: str, timeout: float = 3.0) -> str | None:
    """How the lineage's last comment was read (its `state`), or None when Temporal does not
    answer within ``timeout``: a caller reading the store need not depend on it."""

    async def ask() -> str | None:
        handle = await _lineage_handle(settings, lineage)
        state: LineageState = await handle.query(LineageWorkflow.state)
        return state.last_reading

    try:
        return await asyncio.wait_for(ask(), timeout)
    except (TimeoutError, RuntimeError, RPCError):
        return None


async def next_cycle(handle: LineageHandle) -> int:
    """The cycle after the one a lineage is in (2 for a new one)."""
    try:
        state: LineageState = await handle.query(LineageWorkflow.state)
    except RPCError:
        return 2
    return max(state.cycle, 1) + 1


# ---- reading a lineage's outputs and prompt from the store (the CLI's `output` and `blame`) ----


@dataclass(frozen=True)
class LineageOutput:
    """One whole output of a lineage, with the question it answers."""

    cycle: int
    text: str
    question: str | None  # the cycle's input, when the store has it
    cut_off: bool  # the model stopped at the token limit: the output is unfinished
    # its checks against the reviewer's active wishes (None: no wish to check yet)
    checks: OutputChecks | None = None


def lineage_output(
    store: Store, lineage: str, cycle: int | None = None
) -> tuple[str, LineageOutput | None]:
    """The lineage named by its id or workflow id, and its output of ``cycle`` (default: the
    latest), None when it has none; KeyError when no such lineage is known."""
    q = store.queries
    lineage_id = q.resolve_lineage(lineage)
    chosen = [a for a in q.artifacts(lineage_id) if cycle is None or a.cycle == cycle]
    if not chosen:
        return lineage_id, None
    artifact = chosen[-1]
    return lineage_id, LineageOutput(
        cycle=artifact.cycle,
        text=q.artifact_text(artifact.id),
        question=q.rollout_input(artifact.rollout_id),
        cut_off=any(
            a.id == artifact.attempt_id and a.stop_reason == CUT_OFF
            for a in q.attempts(artifact.rollout_id)
        ),
        checks=q.output_checks_of(lineage_id, artifact.id),
    )


def prompt_blame(store: Store, lineage: str, version: int | None = None) -> list[SegmentProvenance]:
    """Where each segment of the lineage's prompt (of ``version``, default the latest) came
    from; KeyError when no such lineage is known."""
    return store.queries.prompt_provenance(store.queries.resolve_lineage(lineage), version)
