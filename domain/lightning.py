"""Agent Lightning (seed: server-client): versioned resources, dataset tasks, rollout reports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator

from domain.execution import SpanRecord
from domain.payload_size import PAYLOAD_LIMIT_BYTES, json_size
from domain.rollout_report import RolloutReport

MAX_SAMPLE_BYTES = 64 * 1024
MAX_REPORT_BYTES = 1_500_000  # under Temporal's 2 MB payload limit, with room to spare
# Samples wait in the store; what crosses Temporal is a task's id and its sample's size. A
# batch's references stay within this many bytes (its workflow's input, its outcomes); a
# batch's count (at most 1,000 tasks) keeps it far below.
MAX_BATCH_BYTES = 512 * 1024
# What one client activity reads from the store at most: its tasks are cut by count
# (``tasks_per_activity``) and by their samples' bytes, whichever comes first. Any one fits.
MAX_ACTIVITY_SAMPLE_BYTES = 1024 * 1024
# Tasks waiting for a client (queued, not yet completed or failed) per server: past it
# ``queue_task`` raises QueueFull and ``queue_tasks`` admits what fits (docs/reliability.md).
DEFAULT_MAX_WAITING_TASKS = 10_000
# A client beats while it runs a task; one silent this long is taken for dead, and the task is
# tried again on another client (its attempt recorded as failed)
CLIENT_HEARTBEAT_TIMEOUT_SECONDS = 30.0
HeartbeatTimeout = Annotated[float, Field(gt=0, le=600)]
assert MAX_SAMPLE_BYTES <= MAX_ACTIVITY_SAMPLE_BYTES < PAYLOAD_LIMIT_BYTES
assert MAX_BATCH_BYTES < PAYLOAD_LIMIT_BYTES // 2


class QueueFull(Exception):
    """A server's waiting tasks reached its cap: nothing of the refused task was stored.
    Wait for rollouts to finish (``wait_for_rollouts``), then queue again."""

    def __init__(self, server_id: str, waiting: int, cap: int) -> None:
        self.server_id, self.waiting, self.cap = server_id, waiting, cap
        super().__init__(
            f"{waiting:,} tasks already wait for a client on server {server_id!r}; the cap is "
            f"{cap:,} (max_waiting): wait for rollouts to finish, then queue again"
        )


class LLM(BaseModel):
    kind: Literal["llm"] = "llm"
    endpoint: str | None = None  # None: the worker's ANTHROPIC_BASE_URL / the offline model
    model: str
    sampling_params: dict[str, float] = Field(default_factory=dict)


class PromptTemplate(BaseModel):
    kind: Literal["prompt_template"] = "prompt_template"
    template: str = Field(min_length=1)
    engine: Literal["f-string", "jinja2"] = "f-string"


class WorkflowGraph(BaseModel):
    """A multi-step agent's structure: named nodes and the edges between them."""

    kind: Literal["workflow_graph"] = "workflow_graph"
    nodes: dict[str, dict[str, Any]]
    edges: list[tuple[str, str]] = Field(default_factory=list)


Resource = Annotated[LLM | PromptTemplate | WorkflowGraph, Field(discriminator="kind")]


class ResourceSet(BaseModel):
    """Everything an agent is tuned by, as one immutable version."""

    version: int
    resources: dict[str, Resource]


class RolloutTask(BaseModel):
    """One dataset sample to run, as the server SDK queues it: written to the store
    (``rollout_tasks``, the sample a payload blob), never sent through Temporal."""

    rollout_id: str = Field(max_length=200)
    server_id: str = Field(max_length=200)
    iteration: int = 0
    sample: dict[str, Any]
    resources_workflow_id: str = Field(max_length=200)
    resources_version: int
    client_task_queue: str = Field(max_length=200)
    max_attempts: int = Field(default=3, ge=1, le=20)

    @field_validator("sample")
    @classmethod
    def _small(cls, sample: dict[str, Any]) -> dict[str, Any]:
        return small_sample(sample)


def small_sample(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample within MAX_SAMPLE_BYTES as it crosses Temporal; else ValueError with its size."""
    size = json_size(sample)
    if size > MAX_SAMPLE_BYTES:
        raise ValueError(
            f"sample is {size:,} bytes; a task's sample may be at most {MAX_SAMPLE_BYTES:,} "
            "bytes (keep large data elsewhere and pass its id)"
        )
    return sample


class TaskRef(BaseModel):
    """A stored task as it crosses Temporal: its id and its sample's size, never the sample."""

    rollout_id: str = Field(max_length=200)
    sample_bytes: int = Field(ge=0)


def groups_of(
    tasks: list[TaskRef], max_count: int, max_bytes: int = MAX_ACTIVITY_SAMPLE_BYTES
) -> list[list[TaskRef]]:
    """``tasks`` in order, cut into groups of at most ``max_count`` tasks whose samples weigh
    at most ``max_bytes`` together (a heavier task alone is a group of its own: none is, by
    MAX_SAMPLE_BYTES)."""
    groups: list[list[TaskRef]] = []
    size = 0
    for task in tasks:
        if not groups or len(groups[-1]) >= max_count or size + task.sample_bytes > max_bytes:
            groups.append([])
            size = 0
        groups[-1].append(task)
        size += task.sample_bytes
    return groups


class StoredTask(BaseModel):
    """A task to write whose sample is in the store already (an optimization's dataset,
    stored once): its id, its sample's hash and size, the batch that will run it."""

    rollout_id: str = Field(max_length=200)
    sample_hash: str = Field(max_length=64)
    sample_bytes: int = Field(ge=0)
    batch_id: str = Field(max_length=200)


class StoredSample(BaseModel):
    sample_hash: str
    sample_bytes: int


class StoreSamplesInput(BaseModel):
    samples: list[dict[str, Any]]


class StoreTasksInput(BaseModel):
    """An optimization iteration's tasks, each already given to its batch."""

    server_id: str
    iteration: int
    resources_workflow_id: str
    resources_version: int
    client_task_queue: str
    max_attempts: int
    tasks: list[StoredTask]


class ClaimInput(BaseModel):
    """Give waiting tasks to a batch: those of ``rollout_ids`` not taken by another batch,
    or (None) the server's oldest waiting ones, up to ``limit``. Idempotent: a batch that
    claimed already gets what it claimed."""

    server_id: str
    batch_id: str
    rollout_ids: list[str] | None = None
    limit: int = Field(default=250, ge=1, le=1000)


class ClaimedTasks(BaseModel):
    """A batch's tasks (all bound for one client queue, with one attempt budget)."""

    tasks: list[TaskRef]
    client_task_queue: str = ""
    max_attempts: int = 3
    # the batch had claimed these before (a retried or replayed claim): tasks stored since,
    # whose wake-up this round may have absorbed, are still waiting
    repeated: bool = False


class ClientAssignment(BaseModel):
    """What the client activity receives for one task: its id (the client reads the sample
    from the store) and which attempt this is."""

    rollout_id: str
    attempt: int


class ClientReport(BaseModel):
    """What a client returns: the seed's Rollout report plus the spans it traced."""

    report: RolloutReport
    client_id: str
    spans: list[SpanRecord] = Field(default_factory=list)


class DispatcherInput(BaseModel):
    """A server's dispatcher: tasks queued one at a time wait in the store; on each wake-up
    it gives the oldest (``batch_size`` at most) to a batch workflow, by id."""

    server_id: str
    batch_size: int = Field(default=250, ge=1, le=1000)
    tasks_per_activity: int = Field(default=8, ge=1, le=64)
    continue_after: int = Field(default=200, ge=1)  # batches a run sends before continuing
    heartbeat_timeout_seconds: HeartbeatTimeout = CLIENT_HEARTBEAT_TIMEOUT_SECONDS


class RolloutBatch(BaseModel):
    """Tasks run together: one workflow, clients sent a few per activity (each task's attempts
    still its own, recorded one by one). Carries ids and sizes; the samples stay in the store.
    ``claimed``: the tasks are this batch's already (else its first step claims them)."""

    batch_id: str
    server_id: str
    client_task_queue: str
    max_attempts: int = Field(default=3, ge=1, le=20)
    tasks: list[TaskRef] = Field(min_length=1, max_length=1000)
    tasks_per_activity: int = Field(default=8, ge=1, le=64)
    claimed: bool = False
    heartbeat_timeout_seconds: HeartbeatTimeout = CLIENT_HEARTBEAT_TIMEOUT_SECONDS

    @field_validator("tasks")
    @classmethod
    def _within_bytes(cls, tasks: list[TaskRef]) -> list[TaskRef]:
        size = json_size(tasks)
        if size > MAX_BATCH_BYTES:
            raise ValueError(
                f"the batch's task references are {size:,} bytes; a batch may be at most "
                f"{MAX_BATCH_BYTES:,}"
            )
        return tasks


class ClientBatch(BaseModel):
    """What the batched client activity receives: a few tasks, each with its attempt."""

    assignments: list[ClientAssignment]


class ClientBatchReport(BaseModel):
    """Per task, in order: its report, or why it failed (the workflow tries it again)."""

    reports: list[ClientReport | None]
    errors: list[str | None]


class RolloutOutcome(BaseModel):
    rollout_id: str
    status: Literal["completed", "failed"]
    final_reward: float | None
    attempts: int
    error: str | None = None


class PublishInput(BaseModel):
    server_id: str
    version: int
    resource_set: ResourceSet


class TaskAttemptsInput(BaseModel):
    """Attempts of a batch's tasks, by id (the store has the rest); ``errors`` in order, for
    failed ones."""

    server_id: str
    attempt: int
    rollout_ids: list[str]
    errors: list[str] | None = None


class TaskReportsInput(BaseModel):
    """Clients' reports of one attempt at each of a few tasks (each report names its task)."""

    server_id: str
    attempt: int
    reports: list[ClientReport]


class ProposeInput(BaseModel):
    server_id: str
    iteration: int
    template: PromptTemplate
    rollout_ids: list[str]
    target_reward: float
    trainer: Literal["rules", "claude"] = "rules"
    trainer_model: str = "claude-sonnet-5"


class ProposeResult(BaseModel):
    template: PromptTemplate
    changed: bool
    summary: str


class OptimizationInput(BaseModel):
    run_id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    # each sample becomes a task: refused here, at the start, rather than in the workflow
    dataset: list[Annotated[dict[str, Any], AfterValidator(small_sample)]] = Field(
        min_length=1, max_length=5000
    )
    template: PromptTemplate
    llm: LLM
    max_iterations: int = Field(default=5, ge=1, le=100)
    target_reward: float = Field(default=0.9, ge=0, le=1)
    max_parallel: int = Field(default=8, ge=1, le=256)
    curriculum: bool = True
    client_task_queue: str = "lightning-rollouts"
    max_attempts: int = Field(default=3, ge=1, le=20)
    heartbeat_timeout_seconds: HeartbeatTimeout = CLIENT_HEARTBEAT_TIMEOUT_SECONDS
    trainer: Literal["rules", "claude"] = "rules"
    trainer_model: str = "claude-sonnet-5"


class IterationResult(BaseModel):
    iteration: int
    resources_version: int
    mean_reward: float
    template: str
    completed: int
    failed: int
    curriculum_repeats: int
    change: str = ""


class OptimizationResult(BaseModel):
    run_id: str
    best_version: int
    best_template: str
    best_mean_reward: float
    curve: list[IterationResult]


class ServerInput(BaseModel):
    server_id: str
