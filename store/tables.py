"""SQLModel tables: the event log, the payload blobs, and the projections rebuilt from them.

Large text (inputs, outputs, prompts) lives once in ``payload_blobs``; projections reference it by
hash, so the same prompt used by a hundred attempts is stored once.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Index, Integer
from sqlmodel import Field, SQLModel


class TrainingEvent(SQLModel, table=True):
    """The append-only source of truth (seed: training-signal-storage)."""

    __tablename__ = "training_events"

    # global order; BIGINT on PostgreSQL, rowid alias (INTEGER PRIMARY KEY) on SQLite
    position: int | None = Field(
        default=None,
        primary_key=True,
        sa_type=BigInteger().with_variant(Integer(), "sqlite"),  # type: ignore[call-overload]
    )
    # Indexed for the reads the store makes (by id, type, lineage): every index is one more page
    # each append writes. Time and position go together, so time is found by position; sessions
    # are found through the projections.
    id: str = Field(unique=True, max_length=64)
    timestamp: int = Field(sa_type=BigInteger)
    event_type: str = Field(index=True, max_length=64)
    schema_version: int = 1
    session_id: str | None = Field(default=None, max_length=128)
    lineage_id: str | None = Field(default=None, index=True, max_length=128)
    agent_id: str | None = Field(default=None, max_length=128)
    artifact_id: str | None = Field(default=None, max_length=200)
    attempt_id: str | None = Field(default=None, max_length=200)
    payload_hash: str = Field(max_length=64)
    payload_size: int
    tags: str = "[]"  # JSON array
    # Tamper evidence: SHA-256 (or, with a chain key, "<key id>:" HMAC-SHA256) over the previous
    # event's chain hash and this row's fields (store/eventstore/chain_keys.py)
    chain_hash: str | None = Field(default=None, max_length=96)


class EventChainHeadRow(SQLModel, table=True):
    """The end of the hash chain: where the log ends, its last chain hash, and (with a chain
    key) a seal over both."""

    __tablename__ = "event_chain_head"

    id: int = Field(default=1, primary_key=True)
    position: int = Field(default=0, sa_type=BigInteger)
    chain_hash: str = ""
    seal: str = Field(default="", sa_column_kwargs={"server_default": ""})


class PayloadBlob(SQLModel, table=True):
    __tablename__ = "payload_blobs"

    hash: str = Field(primary_key=True, max_length=64)
    content: str  # canonical JSON
    size: int
    created_at: int = Field(sa_type=BigInteger)


# ---- projections (dropped and rebuilt from the log, identically) ----------------------------

PROJECTION_TABLES = (
    "sessions",
    "session_documents",
    "lineages",
    "agent_versions",
    "rollouts",
    "attempts",
    "execution_spans",
    "artifacts",
    "evaluations",
    "rejected_feedback",
    "directives",
    "evolution_records",
    "learning_insights",
    "resource_sets",
    "reading_corrections",
)


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"

    id: str = Field(primary_key=True, max_length=128)
    name: str
    created_at: int = Field(sa_type=BigInteger)


class SessionDocumentRow(SQLModel, table=True):
    __tablename__ = "session_documents"

    id: str = Field(primary_key=True, max_length=200)  # the event id
    session_id: str = Field(index=True, max_length=128)
    name: str
    content_hash: str
    created_at: int = Field(sa_type=BigInteger)


class LineageRow(SQLModel, table=True):
    __tablename__ = "lineages"

    id: str = Field(primary_key=True, max_length=128)
    session_id: str = Field(index=True, max_length=128)
    label: str
    workflow_id: str
    locked: bool = False
    lock_reason: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class AgentVersionRow(SQLModel, table=True):
    __tablename__ = "agent_versions"

    id: str = Field(primary_key=True, max_length=160)  # "<agent_id>@<version>"
    agent_id: str = Field(index=True, max_length=128)
    lineage_id: str = Field(index=True, max_length=128)
    version: int
    definition_hash: str  # payload blob holding the whole AgentDefinition
    system_prompt_hash: str
    tools_hash: str
    flow_hash: str
    evolution_id: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class RolloutRow(SQLModel, table=True):
    __tablename__ = "rollouts"
    # a dataset server's waiting tasks (pending or running) are counted at every queue_task
    __table_args__ = (Index("ix_rollouts_session_status", "session_id", "status"),)

    id: str = Field(primary_key=True, max_length=200)
    session_id: str = Field(index=True, max_length=128)
    lineage_id: str = Field(index=True, max_length=128)
    cycle: int
    input_hash: str
    status: str = "pending"  # pending → running → completed / failed
    final_attempt_id: str | None = None
    error: str | None = None
    # Agent Lightning tasks: the resource version used, the reported reward and report
    resources_version: int | None = None
    final_reward: float | None = None
    report_hash: str | None = None
    client_id: str | None = None
    created_at: int = Field(sa_type=BigInteger)
    completed_at: int | None = Field(default=None, sa_type=BigInteger)


class AttemptRow(SQLModel, table=True):
    __tablename__ = "attempts"

    id: str = Field(primary_key=True, max_length=200)
    rollout_id: str = Field(index=True, max_length=200)
    attempt_number: int
    status: str = "running"  # running → succeeded / failed
    agent_id: str
    agent_version: int
    system_prompt_hash: str
    tools_hash: str
    flow_hash: str
    input_hash: str
    model_id: str
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    output_hash: str | None = None
    error: str | None = None
    duration_ms: int | None = None
    total_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    estimated_cost: float | None = None
    # why the model stopped: "max_tokens" when the output was cut off at the token limit
    stop_reason: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class SpanRow(SQLModel, table=True):
    __tablename__ = "execution_spans"

    # Keyed within their attempt (migration 0007): spans are read by attempt, and the key serves
    # those reads, so a span row writes two B-trees, not three (the table, its key, an index).
    attempt_id: str = Field(primary_key=True, max_length=200)
    id: str = Field(primary_key=True, max_length=220)
    parent_span_id: str | None = None
    sequence: int
    type: str  # llm_call | tool_call | tool_result | reasoning | output
    name: str | None = None
    # The texts themselves: a span's input and output are rarely shared, and each span event
    # batch already holds them once (see store/records/projections.py).
    input: str | None = None
    output: str | None = None
    model_id: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_name: str | None = None
    tool_args: str | None = None  # JSON
    tool_result: str | None = None
    tool_error: str | None = None
    duration_ms: int | None = None
    estimated_cost: float | None = None
    started_at: int | None = Field(default=None, sa_type=BigInteger)
    trace_id: str | None = None
    otel_span_id: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class ArtifactRow(SQLModel, table=True):
    __tablename__ = "artifacts"

    id: str = Field(primary_key=True, max_length=220)
    session_id: str = Field(index=True, max_length=128)
    lineage_id: str = Field(index=True, max_length=128)
    rollout_id: str = Field(max_length=200)
    attempt_id: str = Field(max_length=200)
    cycle: int
    agent_version: int
    content_hash: str
    created_at: int = Field(sa_type=BigInteger)


class EvaluationRow(SQLModel, table=True):
    __tablename__ = "evaluations"
    # A score's comparison check looks up its session's scores of one cycle (migration 0008);
    # other readers, a session's.
    __table_args__ = (Index("ix_evaluations_session_cycle", "session_id", "cycle"),)

    id: str = Field(primary_key=True, max_length=220)
    artifact_id: str = Field(index=True, max_length=220)
    session_id: str = Field(max_length=128)
    lineage_id: str = Field(index=True, max_length=128)
    cycle: int
    agent_version: int | None = None  # unknown for events written before schema v2
    score: float
    comment: str | None = None
    rater: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class RejectedFeedbackRow(SQLModel, table=True):
    __tablename__ = "rejected_feedback"

    id: str = Field(primary_key=True, max_length=220)
    lineage_id: str = Field(index=True, max_length=128)
    cycle: int
    kind: str
    payload_preview: str
    reason: str
    created_at: int = Field(sa_type=BigInteger)


class DirectiveRow(SQLModel, table=True):
    __tablename__ = "directives"

    id: str = Field(primary_key=True, max_length=220)
    lineage_id: str = Field(index=True, max_length=128)
    cycle: int
    kind: str  # sticky | oneshot
    content: str
    created_at: int = Field(sa_type=BigInteger)


class ReadingCorrectionRow(SQLModel, table=True):
    """Labelled examples for the reader: a comment and the wants a rater said it asks for
    (``reading.corrected``; migration 0011). Read by session, latest first."""

    __tablename__ = "reading_corrections"
    __table_args__ = (Index("ix_reading_corrections_session_created", "session_id", "created_at"),)

    id: str = Field(primary_key=True, max_length=200)  # the correction id
    session_id: str = Field(max_length=128)
    lineage_id: str = Field(index=True, max_length=128)
    evaluation_id: str = Field(max_length=220)
    comment: str
    read_as: str = "[]"  # JSON array of wants
    corrected: str  # JSON array of wants
    rater: str | None = None
    cycle: int | None = None
    created_at: int = Field(index=True, sa_type=BigInteger)


class EvolutionRecordRow(SQLModel, table=True):
    __tablename__ = "evolution_records"

    id: str = Field(primary_key=True, max_length=200)
    lineage_id: str = Field(index=True, max_length=128)
    kind: str = "evolution"  # evolution | rollback
    from_version: int
    to_version: int
    rollout_id: str
    attempt_id: str | None = None
    artifact_id: str
    evaluation_id: str
    trigger_score: float
    trigger_comment: str | None = None
    directives: str  # JSON
    score_analysis: str  # JSON
    credit_assignment: str  # JSON
    plan: str  # JSON
    changes: str  # JSON
    hypothesis: str
    next_score: float | None = None
    score_delta: float | None = None
    hypothesis_validated: bool | None = None
    outcome_reason: str | None = None
    created_at: int = Field(sa_type=BigInteger)


class LearningInsightRow(SQLModel, table=True):
    __tablename__ = "learning_insights"

    id: str = Field(primary_key=True, max_length=64)
    session_id: str = Field(index=True, max_length=128)
    pattern: str
    pattern_type: str
    contexts: str = "[]"  # JSON
    success_count: int = 0
    failure_count: int = 0
    avg_score_impact: float = 0.0
    confidence: float = 0.0
    created_at: int = Field(sa_type=BigInteger)
    updated_at: int = Field(sa_type=BigInteger)


# ---- materialized training data (rebuilt by the materializer, from the log) ------------------


class TrainingExampleRow(SQLModel, table=True):
    """SFT examples, preference pairs and reward rows (seed: mv_training_examples)."""

    __tablename__ = "mv_training_examples"

    id: str = Field(primary_key=True, max_length=300)
    example_type: str = Field(index=True, max_length=16)  # sft | preference | reward
    source: str = Field(max_length=16)  # score | comparison | lock
    session_id: str = Field(index=True, max_length=128)
    lineage_id: str | None = Field(default=None, index=True, max_length=128)
    cycle: int
    system_prompt_hash: str | None = None
    user_input_hash: str
    completion_hash: str | None = None
    chosen_hash: str | None = None
    rejected_hash: str | None = None
    score: float | None = None
    score_delta: float | None = None
    source_events: str  # JSON array of event ids
    created_at: int = Field(index=True, sa_type=BigInteger)


class ScoredArtifactRow(SQLModel, table=True):
    """The materializer's own index of scored outputs, in log order (for pairing)."""

    __tablename__ = "mv_scored_artifacts"
    # Pairing looks up the outputs of one session and cycle; a lock, those of one session.
    __table_args__ = (Index("ix_mv_scored_artifacts_session_cycle", "session_id", "cycle"),)

    artifact_id: str = Field(primary_key=True, max_length=220)
    session_id: str = Field(max_length=128)
    lineage_id: str = Field(max_length=128)
    cycle: int
    score: float
    event_id: str
    input_hash: str
    content_hash: str


class MaterializerStateRow(SQLModel, table=True):
    __tablename__ = "materializer_state"

    name: str = Field(primary_key=True, max_length=64)
    last_position: int = Field(default=0, sa_type=BigInteger)


class ExportRow(SQLModel, table=True):
    """Every export, with what it asked for and what it wrote (seed: exports)."""

    __tablename__ = "exports"

    id: str = Field(primary_key=True, max_length=64)
    export_type: str
    query_params: str  # JSON
    event_range_start: int = Field(sa_type=BigInteger)
    event_range_end: int = Field(sa_type=BigInteger)
    example_count: int
    file_path: str
    created_at: int = Field(sa_type=BigInteger)


class ResourceSetRow(SQLModel, table=True):
    """Published resource versions, append-only; the latest is the highest version."""

    __tablename__ = "resource_sets"

    id: str = Field(primary_key=True, max_length=200)  # "<server_id>@<version>"
    server_id: str = Field(index=True, max_length=128)
    version: int
    content_hash: str
    created_at: int = Field(sa_type=BigInteger)


# ---- the dataset task queue (operational state, not a projection) --------------------------


class RolloutTaskRow(SQLModel, table=True):
    """Dataset tasks as the server SDK queues them, in queue order: the sample (a payload
    blob) and what a client needs to run it, and the batch that took it (None: waiting for
    the dispatcher). Written with the task's ``task.queued`` event, in its transaction; like
    Temporal's own state it is not rebuilt from the log (the log keeps each task's sample,
    iteration and resource version; the ``rollouts`` projection its status)."""

    __tablename__ = "rollout_tasks"
    __table_args__ = (Index("ix_rollout_tasks_waiting", "server_id", "batch_id", "position"),)

    position: int | None = Field(
        default=None,
        primary_key=True,
        sa_type=BigInteger().with_variant(Integer(), "sqlite"),  # type: ignore[call-overload]
    )
    rollout_id: str = Field(unique=True, max_length=200)
    server_id: str = Field(max_length=128)
    iteration: int
    sample_hash: str = Field(max_length=64)
    sample_bytes: int
    resources_workflow_id: str = Field(max_length=200)
    resources_version: int
    client_task_queue: str = Field(max_length=200)
    max_attempts: int
    batch_id: str | None = Field(default=None, index=True, max_length=200)
    created_at: int = Field(sa_type=BigInteger)


# ---- RLM findings (isolated stores, and the opt-in shared store) -----------------------------


class RlmObjectRow(SQLModel, table=True):
    __tablename__ = "rlm_objects"

    store_id: str = Field(primary_key=True, max_length=128)
    id: str = Field(primary_key=True, max_length=400)
    type: str = Field(max_length=32)
    description: str
    content: str = "{}"  # JSON
    backrefs: str = "[]"
    parents: str = "[]"
    children: str = "[]"
    tags: str = "[]"
    worker: str | None = None
    commit_key: str | None = None
    invalidated: str | None = None
    position: int = Field(default=0, sa_type=BigInteger)


class RlmCommitRow(SQLModel, table=True):
    __tablename__ = "rlm_commits"

    store_id: str = Field(primary_key=True, max_length=128)
    key: str = Field(primary_key=True, max_length=400)
    fingerprint: str


class RlmProposalRow(SQLModel, table=True):
    __tablename__ = "rlm_proposals"

    store_id: str = Field(primary_key=True, max_length=128)
    id: str = Field(primary_key=True, max_length=400)
    target_id: str
    patch: str = "{}"
    description_update: str | None = None
    status: str = "pending"
    reason: str | None = None


class RlmSharedEventRow(SQLModel, table=True):
    """The shared store's append-only log; ``seq`` is the global sequence."""

    __tablename__ = "rlm_shared_events"

    seq: int | None = Field(
        default=None,
        primary_key=True,
        sa_type=BigInteger().with_variant(Integer(), "sqlite"),  # type: ignore[call-overload]
    )
    store_id: str = Field(index=True, max_length=128)
    worker_id: str = Field(max_length=128)
    kind: str = Field(max_length=16)  # create | invalidate
    object_id: str = Field(max_length=200)
    payload: str  # JSON
    created_at: int = Field(sa_type=BigInteger)


class RlmSharedWorkerRow(SQLModel, table=True):
    __tablename__ = "rlm_shared_workers"

    store_id: str = Field(primary_key=True, max_length=128)
    worker_id: str = Field(primary_key=True, max_length=128)
    next_seq: int = 0
