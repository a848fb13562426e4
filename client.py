"""The client library: connect to Temporal, start a session's lineages, branch a lineage from
a version and promote a champion, wait for an output, read a lineage's state, and read its
outputs, its prompt's provenance and a session's champion from a store. The CLI
(``starter.py``), the review inbox, the examples, the benches and the tests all go through it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import string
import uuid
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import lazy_loader as lazy
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TimeoutError_
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode

from codec.encryption import codec_from_env, data_converter
from domain import search_attributes
from domain.execution import CUT_OFF
from domain.reading_preview import PREVIEW_TIMEOUT, PREVIEW_WORKFLOW, LineagePreview, PreviewAsked
from domain.settings import Settings

# The lineage workflow (with the activities and the store it imports: seconds) and what the
# lineage's state needs load on first use: a command that only asks for a reading
# (`training-camp score`, `read`: ``preview_on_worker``) never loads them; nor, before the
# reading is shown, the credential detectors that mask what is sent (detect_secrets, requests)
redaction = lazy.load("domain.redaction", suppress_warning=True)
# the session's front and a version's definition: a reading needs neither
selection = lazy.load("domain.selection", suppress_warning=True)
agent_model = lazy.load("domain.agent", suppress_warning=True)
events = lazy.load("domain.events", suppress_warning=True)
want_labels = lazy.load("domain.want_labels", suppress_warning=True)
lineage_workflow = lazy.load("workflows.lineage", suppress_warning=True)
lineage_model = lazy.load("domain.lineage", suppress_warning=True)
telemetry = lazy.load("runner.telemetry", suppress_warning=True)
spec_files = lazy.load("domain.spec", suppress_warning=True)
yaml = lazy.load("yaml", suppress_warning=True)

if TYPE_CHECKING:
    from domain.checks import OutputChecks
    from domain.feedback import CorrectionAccepted, CorrectionTaken, Promoted, ScoreAccepted
    from domain.lineage import LineageState
    from domain.selection import FrontRow
    from domain.spec import SessionSpec
    from domain.trace import Trace
    from domain.trainer import SegmentProvenance
    from store import Store  # the store is the caller's: the library opens none
    from workflows.lineage import LineageWorkflow

    LineageHandle = WorkflowHandle[LineageWorkflow, object]

log = logging.getLogger(__name__)


async def connect(settings: Settings, runtime: Runtime | None = None) -> Client:
    """A client for ``settings``' Temporal; payloads are encrypted when a key is configured
    (every client and worker alike)."""
    interceptors = []
    if settings.temporal_tracing:
        interceptors.append(telemetry.tracing_interceptor())
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(codec_from_env()),
        interceptors=interceptors,
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
            lineage_workflow.LineageWorkflow.run,
            lineage_model.LineageInput(
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
            search_attributes=_search_attributes(spec.session_id, lineage_id),
        )
        handles.append(handle)
    return handles


def _search_attributes(session_id: str, lineage_id: str) -> TypedSearchAttributes:
    # "running" from the start (the workflow reads it back; continue-as-new carries it over):
    # a lineage's first cycle writes nothing to visibility
    return TypedSearchAttributes(
        [
            SearchAttributePair(search_attributes.SESSION, session_id),
            SearchAttributePair(search_attributes.LINEAGE, lineage_id),
            SearchAttributePair(search_attributes.STATUS, "running"),
        ]
    )


# ---- selection across lineages: branch, promote, the champion's spec -----------------------

LABEL = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # as a spec's lineage labels


@dataclass(frozen=True)
class Branched:
    """A lineage started from a version of another: its id, label and workflow."""

    lineage_id: str
    label: str
    parent_lineage_id: str
    parent_version: int
    handle: LineageHandle


async def branch_lineage(
    client: Client,
    store: Store,
    lineage: str,
    version: int,
    label: str | None = None,
    session: str | None = None,
    rater: str | None = None,
) -> Branched:
    """Start a new lineage of ``lineage``'s session from its ``version`` (its agent, inputs,
    options and standing wishes), labelled ``label`` (default: the next free letter), branched
    by ``rater``. It runs on the parent's task queue. ValueError says why not: no such
    version, a label taken, a lineage of another session than ``session``; KeyError: no such
    lineage."""
    q = store.queries
    parent_id = q.resolve_lineage(lineage)
    parent = q.lineage(parent_id)
    assert parent is not None
    if session is not None and parent.session_id != session:
        raise ValueError(
            f"{parent_id} is a lineage of session {parent.session_id}, not {session}: a branch "
            "starts from a lineage of its own session"
        )
    made = [row.version for row in q.agent_versions(parent_id)]
    if version not in made:
        raise ValueError(f"{parent_id} has no v{version}: it has made v1 to v{max(made)}")
    try:
        q.lineage_inputs(parent_id)
    except KeyError as exc:
        raise ValueError(f"cannot branch {parent_id}: {exc.args[0]}") from None
    taken = {row.label for row in q.session_lineages(parent.session_id)}
    label = label or _next_label(taken)
    if not LABEL.match(label):
        raise ValueError(f"label {label!r}: 1 to 32 letters, digits, '-' or '_'")
    if label in taken:
        raise ValueError(f"session {parent.session_id} has a lineage {label} already")
    row = q.session(parent.session_id)
    parent_handle = client.get_workflow_handle(parent.workflow_id)
    queue = (await parent_handle.describe()).task_queue
    state: LineageState = await parent_handle.query(lineage_workflow.LineageWorkflow.state)
    lineage_id = f"{parent.session_id}-{label}"
    handle = await client.start_workflow(
        lineage_workflow.LineageWorkflow.run,
        lineage_model.LineageInput(
            session_id=parent.session_id,
            session_name=row.name if row else parent.session_id,
            lineage_id=lineage_id,
            label=label,
            options=state.options,
            branch=lineage_model.BranchOrigin(
                lineage_id=parent_id,
                version=version,
                rater=redaction.redact(rater) if rater else None,
            ),
        ),
        id=workflow_id(lineage_id),
        task_queue=queue,
        search_attributes=_search_attributes(parent.session_id, lineage_id),
    )
    return Branched(lineage_id, label, parent_id, version, handle)


def _next_label(taken: set[str]) -> str:
    """The first capital letter no lineage of the session has, then A2, B2…"""
    for n in range(1, 100):
        for letter in string.ascii_uppercase:
            label = letter if n == 1 else f"{letter}{n}"
            if label not in taken:
                return label
    raise ValueError("no free label: give one (--label)")


async def promote_lineage(
    client: Client,
    lineage: str,
    version: int | None = None,
    reason: str | None = None,
    rater: str | None = None,
    stop_others: bool = False,
) -> tuple[Promoted, list[str]]:
    """Promote ``lineage`` (its id or workflow id) at ``version`` (default: the one it runs)
    as its session's champion through its ``promote`` update, then, with ``stop_others``,
    stop every competitor still running. Returns what the lineage recorded and the
    competitors stopped; ValueError with the lineage's reason when it refuses."""
    handle = client.get_workflow_handle(workflow_id(lineage.removeprefix("lineage-")))
    payload: dict[str, object] = {}
    if version is not None:
        payload["version"] = version
    if reason:
        payload["reason"] = redaction.redact(reason)
    if rater:
        payload["rater"] = redaction.redact(rater)
    try:
        promoted = await handle.execute_update(lineage_workflow.LineageWorkflow.promote, payload)
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise ValueError(
            cause.message if isinstance(cause, ApplicationError) else str(cause)
        ) from None
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise ValueError(f"{lineage} is not running: {exc.message}") from None
        raise
    stopped = []
    for rival in sorted(promoted.competitor_scores) if stop_others else []:
        try:
            await client.get_workflow_handle(workflow_id(rival)).signal(
                "stop", {"reason": f"{promoted.lineage_id} v{promoted.version} promoted"}
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:  # ended already
                raise
            continue
        stopped.append(rival)
    return promoted, stopped


def session_versions(store: Store, session_id: str) -> list[FrontRow]:
    """Every version of every lineage of the session (lineages by label, versions in order)
    with its record over its scored cycles — mean score, share of the standing checks its
    scored outputs passed, cycles scored — marked on the front or not
    (``domain/selection.py``). Empty for a session the store does not know."""
    q = store.queries
    lineages = q.session_lineages(session_id)
    labels = {row.id: row.label for row in lineages}
    champion = q.champion(session_id)
    records = []
    for lineage in lineages:
        origin = q.branch_origin(lineage.id)
        checks = q.output_checks(lineage.id)
        scores: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        passed: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for e in q.evaluations(lineage.id):
            version = e.agent_version or 1
            scores[version][e.cycle].append(e.score)
            found = checks.get(e.artifact_id)
            for check in found.checks if found else []:
                if check.measured:
                    passed[version][0] += check.passed
                    passed[version][1] += 1
        # the wishes standing on each version, as the history records them (the last word)
        standing = {e.version: e for e in q.lineage_events(lineage.id, events.WishesStanding)}
        for row in q.agent_versions(lineage.id):
            by_cycle = scores[row.version]
            stood = standing.get(row.version)
            parent = (
                f"{labels.get(origin.parent_lineage_id, origin.parent_lineage_id)} "
                f"v{origin.parent_version}"
                if origin is not None and row.version == 1
                else None
            )
            records.append(
                selection.VersionRecord(
                    lineage_id=lineage.id,
                    label=lineage.label,
                    version=row.version,
                    scores=tuple(sum(s) / len(s) for _, s in sorted(by_cycle.items())),
                    checks_passed=passed[row.version][0],
                    checks=passed[row.version][1],
                    standing=tuple(
                        want_labels.standing_words(w.family, w.action, w.detail)
                        for w in (stood.wishes if stood else [])
                    ),
                    branched_from=parent,
                    champion=champion is not None
                    and champion[0] == lineage.id
                    and champion[1].version == row.version,
                )
            )
    return selection.front(records)


def champion_spec(store: Store, session_id: str, new_id: str | None = None) -> str:
    """A session spec (YAML) `training-camp start` accepts: ``session_id``'s inputs with its
    champion's version as the one lineage, under ``new_id`` (default ``<session>-champion``).
    KeyError when the session has no champion (or the store lacks its inputs)."""
    q = store.queries
    found = q.champion(session_id)
    if found is None:
        raise KeyError(
            f"session {session_id!r} has no champion: promote one with `training-camp promote`"
        )
    lineage_id, promoted = found
    row = q.lineage(lineage_id)
    label = row.label if row else "A"
    agent = q.agent_definition(agent_model.AgentRef(agent_id=lineage_id, version=promoted.version))
    session = q.session(session_id)
    name = session.name if session else session_id
    spec = {
        "name": f"{name} (champion)"[:200],
        "id": new_id or f"{session_id[:54]}-champion",
        "description": f"The champion of session {session_id}: {label} v{promoted.version}.",
        "inputs": q.lineage_inputs(lineage_id),
        "lineages": [
            {
                "label": label,
                "agent": agent.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        ],
    }
    spec_files.parse_spec(spec, "the champion's spec")  # what `start` will check
    text = yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=100)
    documents = sorted(q.session_documents(session_id))
    if documents:  # a spec names documents by path: the files are the user's to give
        text += (
            "# The session's agents read documents: list their files here to give them too\n"
            + "".join(f"# documents: {name}\n" for name in documents)
        )
    return text


async def await_output(handle: LineageHandle, cycle: int) -> LineageState:
    """Block until cycle ``cycle``'s output awaits its score (or the lineage stops or fails),
    without polling; asks again when a run continues as new meanwhile."""

    while True:
        state = await handle.execute_update(lineage_workflow.LineageWorkflow.await_output, cycle)
        if state.cycle >= cycle or state.status in ("failed", "stopped", "completed"):
            return state


async def _lineage_handle(settings: Settings, lineage: str) -> LineageHandle:
    """The workflow of a lineage named by its id or its workflow id."""
    client = await connect(settings)
    return client.get_workflow_handle(workflow_id(lineage.removeprefix("lineage-")))


async def correct_reading(
    settings: Settings,
    lineage: str,
    wants: list[str],
    rater: str,
    evaluation_id: str | None = None,
) -> CorrectionTaken:
    """Correct how a score of the lineage (its id or workflow id) was read — the score named
    by ``evaluation_id``, by default the latest (whose reading ``state`` and ``training-camp
    output`` show) — and wait until the lineage has taken the correction: ValueError with the
    lineage's reason when it refuses (an unknown family, a later score, another rater's)."""

    handle = await _lineage_handle(settings, lineage)
    if evaluation_id is None:
        state: LineageState = await handle.query(lineage_workflow.LineageWorkflow.state)
        if not state.score_history:
            raise ValueError("nothing to correct: no score on this lineage has been read yet")
        evaluation_id = state.score_history[-1].evaluation_id
    payload = {
        "wants": [redaction.redact(w) for w in wants],
        "rater": redaction.redact(rater),
        "evaluation_id": evaluation_id,
    }
    try:
        accepted = await handle.execute_update(
            lineage_workflow.LineageWorkflow.correct_reading, payload
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause)
        raise ValueError(reason) from None
    done = await correction_outcome(handle, accepted)
    if done.error is not None:
        raise ValueError(done.error)
    return done


async def correction_outcome(
    handle: LineageHandle, accepted: CorrectionAccepted
) -> CorrectionTaken:
    """What an accepted correction did, once the lineage has taken it (its output awaits a
    score again, or its re-run failed). Waits through ``await_output``, without polling: the
    correction's update answered at once and holds no update slot. ValueError when the
    lineage cannot take it now (ended, or a failed rollout waiting for `retry`)."""
    while accepted.done is None:
        state = await await_output(handle, accepted.cycle)
        taken = [c for c in state.corrections if c.correction_id == accepted.correction_id]
        if taken:
            return taken[-1]
        if state.status == "failed":
            raise ValueError(
                "a rollout failed (state.last_error); the correction is taken once it runs "
                "again (send `retry`)"
            )
        if state.status in ("stopped", "completed"):
            raise ValueError(f"the lineage is {state.status}; the correction was not taken")
        if state.status == "awaiting_score" and not state.corrections_waiting:
            raise ValueError("the correction was taken, but later ones since: see `state`")
    return accepted.done


async def submit_score(client: Client, lineage: str, payload: dict[str, object]) -> ScoreAccepted:
    """Send a score through the lineage's ``submit_score`` update (its id or workflow id):
    ValueError with the lineage's reason when it refuses. A credential in its texts is masked
    before it leaves: Temporal's history keeps an update's input as sent."""

    handle = client.get_workflow_handle(workflow_id(lineage.removeprefix("lineage-")))
    try:
        return await handle.execute_update(
            lineage_workflow.LineageWorkflow.submit_score, _masked(payload)
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        raise ValueError(
            cause.message if isinstance(cause, ApplicationError) else str(cause)
        ) from None


def _masked(payload: dict[str, object]) -> dict[str, object]:
    """``payload`` with its texts (comment, rater, wants) redacted; the rest as it is (the
    lineage's validation names what is wrong with it)."""

    masked = dict(payload)
    for field in ("comment", "rater"):
        value = masked.get(field)
        if isinstance(value, str):
            masked[field] = redaction.redact(value)
    wants = masked.get("wants")
    if isinstance(wants, list):
        masked["wants"] = [redaction.redact(w) if isinstance(w, str) else w for w in wants]
    return masked


async def last_reading(settings: Settings, lineage: str, timeout: float = 3.0) -> str | None:
    """How the lineage's last comment was read (its `state`), or None when Temporal does not
    answer within ``timeout``: a caller reading the store need not depend on it."""

    async def ask() -> str | None:
        handle = await _lineage_handle(settings, lineage)
        state: LineageState = await handle.query(lineage_workflow.LineageWorkflow.state)
        return state.last_reading

    try:
        return await asyncio.wait_for(ask(), timeout)
    except (TimeoutError, RuntimeError, RPCError):
        return None


async def preview_on_worker(
    client: Client,
    lineage: str,
    score: float,
    comment: str | None,
    wants: list[str] | None = None,
    rater: str | None = None,
) -> LineagePreview:
    """``preview_reading`` made by a worker of the lineage (its id or workflow id), on its task
    queue: the reader there is loaded, and the corrections, setting, trainer backend and plan
    are the step's own (``wants``: the wishes as the rater edited them, planned for). The
    comment is masked before it leaves (the reading's workflow keeps it in its history).
    KeyError when Temporal has no such lineage, TimeoutError when no worker read it within
    ``PREVIEW_TIMEOUT`` (none polls the queue)."""

    handle = client.get_workflow_handle(workflow_id(lineage.removeprefix("lineage-")))
    try:
        queue = (await handle.describe()).task_queue
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise
        raise KeyError(f"no lineage {lineage!r} in Temporal (by lineage or workflow id)") from None
    asked = PreviewAsked(
        lineage=lineage,
        score=score,
        comment=redaction.redact(comment) if comment else None,
        wants=[redaction.redact(w) for w in wants] if wants is not None else None,
        rater=redaction.redact(rater) if rater else None,
    )
    try:
        return await client.execute_workflow(
            PREVIEW_WORKFLOW,
            asked,
            result_type=LineagePreview,
            id=f"reading-preview-{handle.id.removeprefix('lineage-')}-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
            execution_timeout=PREVIEW_TIMEOUT,
        )
    except WorkflowFailureError as exc:
        cause = exc.cause.cause if isinstance(exc.cause, ActivityError) else exc.cause
        if isinstance(cause, ApplicationError) and cause.type == "UnknownLineage":
            raise KeyError(cause.message) from None
        if isinstance(cause, TimeoutError_):
            raise TimeoutError(
                f"no worker read the comment within {PREVIEW_TIMEOUT.seconds} s: is a worker "
                f"running on the lineage's task queue {queue!r}?"
            ) from None
        raise


async def next_cycle(handle: LineageHandle) -> int:
    """The cycle after the one a lineage is in (2 for a new one)."""

    try:
        state: LineageState = await handle.query(lineage_workflow.LineageWorkflow.state)
    except RPCError:
        return 2
    return max(state.cycle, 1) + 1


# ---- a lineage's outputs, traces and prompt, from the store (`output`, `trace`, `blame`) ----


@dataclass(frozen=True)
class LineageOutput:
    """One whole output of a lineage, with the question it answers."""

    cycle: int
    text: str
    question: str | None  # the cycle's input, when the store has it
    cut_off: bool  # the model stopped at the token limit: the output is unfinished
    output_id: str = ""  # its rollout's id: a score naming it (`output_id`) lands on it or none
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
        output_id=artifact.rollout_id,
        cut_off=any(
            a.id == artifact.attempt_id and a.stop_reason == CUT_OFF
            for a in q.attempts(artifact.rollout_id)
        ),
        checks=q.output_checks_of(lineage_id, artifact.id),
    )


@dataclass(frozen=True)
class LineageTrace:
    """The trace of one cycle's run: each attempt's flow steps with their calls."""

    cycle: int
    question: str | None  # the cycle's input, when the store has it
    trace: Trace


def lineage_trace(
    store: Store, lineage: str, cycle: int | None = None
) -> tuple[str, LineageTrace | None]:
    """The lineage named by its id or workflow id, and the trace of ``cycle``'s run (default:
    the run of the latest output; a cycle whose run failed has no output but a trace), None
    when there is none; KeyError when no such lineage is known."""
    q = store.queries
    lineage_id = q.resolve_lineage(lineage)
    outputs = [a for a in q.artifacts(lineage_id) if cycle is None or a.cycle == cycle]
    runs = [r for r in q.rollouts(lineage_id) if cycle is None or r.cycle == cycle]
    if outputs:  # a cycle run again after a corrected reading: its later output
        run = next(r for r in runs if r.id == outputs[-1].rollout_id)
    elif runs:
        run = runs[-1]
    else:
        return lineage_id, None
    return lineage_id, LineageTrace(
        cycle=run.cycle, question=q.rollout_input(run.id), trace=q.rollout_trace(run.id)
    )


def prompt_blame(store: Store, lineage: str, version: int | None = None) -> list[SegmentProvenance]:
    """Where each segment of the lineage's prompt (of ``version``, default the latest) came
    from; KeyError when no such lineage is known."""
    return store.queries.prompt_provenance(store.queries.resolve_lineage(lineage), version)


def agent_blame(store: Store, lineage: str, version: int | None = None) -> list[SegmentProvenance]:
    """Where every part of the lineage's agent came from: the prompt's segments, then each
    parameter, tool, flow step and edge; KeyError when no such lineage is known."""
    return store.queries.agent_provenance(store.queries.resolve_lineage(lineage), version)
