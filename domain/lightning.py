"""Agent Lightning (seed: server-client): versioned resources, dataset tasks, rollout reports."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, field_validator

from domain.execution import SpanRecord
from domain.payload_size import PAYLOAD_LIMIT_BYTES, json_size
from domain.rollout_report import RolloutReport

MAX_SAMPLE_BYTES = 64 * 1024
MAX_REPORT_BYTES = 1_500_000  # under Temporal's 2 MB payload limit, with room to spare
# A task's sample plus its ids (each at most 200 characters): what one task weighs at most
MAX_TASK_BYTES = MAX_SAMPLE_BYTES + 4 * 1024
# Batches are sized by bytes as well as by count: a batch's tasks cross Temporal together (the
# batch workflow's input, its record steps, a client activity's assignments), and the
# dispatcher carries at most this much across continue-as-new. Any one task fits.
MAX_BATCH_BYTES = 512 * 1024
assert MAX_TASK_BYTES <= MAX_BATCH_BYTES < PAYLOAD_LIMIT_BYTES // 2


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
    """One dataset sample to run, queued by the server for any client to take."""

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
            f"sample is {size:,} bytes; a task's sample crosses Temporal and may be at most "
            f"{MAX_SAMPLE_BYTES:,} bytes (keep large data elsewhere and pass its id)"
        )
    return sample


def batches_of(
    tasks: list[RolloutTask], max_count: int, max_bytes: int = MAX_BATCH_BYTES
) -> list[list[RolloutTask]]:
    """``tasks`` in order, cut into batches of at most ``max_count`` tasks and ``max_bytes``
    (a task heavier than ``max_bytes`` alone would be a batch of its own: none is, by
    MAX_TASK_BYTES)."""
    batches: list[list[RolloutTask]] = []
    size = 0
    for task in tasks:
        weight = json_size(task)
        if not batches or len(batches[-1]) >= max_count or size + weight > max_bytes:
            batches.append([])
            size = 0
        batches[-1].append(task)
        size += weight
    return batches


class ClientAssignment(BaseModel):
    """What the client activity receives: the task and which attempt this is."""

    task: RolloutTask
    attempt: int


class ClientReport(BaseModel):
    """What a client returns: the seed's Rollout report plus the spans it traced."""

    report: RolloutReport
    client_id: str
    spans: list[SpanRecord] = Field(default_factory=list)


class DispatcherInput(BaseModel):
    """A server's dispatcher: tasks queued one at a time leave in batches."""

    server_id: str
    linger_ms: int = Field(default=5, ge=0, le=10_000)  # how long a lone task waits for others
    batch_size: int = Field(default=250, ge=1, le=1000)
    tasks_per_activity: int = Field(default=8, ge=1, le=64)
    continue_after: int = Field(default=200, ge=1)  # batches a run sends before continuing
    batches_before: int = 0  # batches earlier runs sent: the next batch's number
    # carried across continue-as-new: at most MAX_BATCH_BYTES (the rest leaves first)
    pending: list[RolloutTask] = Field(default_factory=list)


class RolloutBatch(BaseModel):
    """Tasks queued together: one workflow, clients sent a few per activity (each task's
    attempts still its own, recorded one by one)."""

    batch_id: str
    tasks: list[RolloutTask] = Field(min_length=1, max_length=1000)
    tasks_per_activity: int = Field(default=8, ge=1, le=64)

    @field_validator("tasks")
    @classmethod
    def _within_bytes(cls, tasks: list[RolloutTask]) -> list[RolloutTask]:
        size = json_size(tasks)
        if size > MAX_BATCH_BYTES:
            raise ValueError(
                f"the batch's tasks are {size:,} bytes; a batch may be at most "
                f"{MAX_BATCH_BYTES:,} (cut it with domain.lightning.batches_of)"
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


class TaskAttemptInput(BaseModel):
    task: RolloutTask
    attempt: int
    error: str | None = None


class TaskReportInput(BaseModel):
    task: RolloutTask
    attempt: int
    client_report: ClientReport


class TaskAttemptsInput(BaseModel):
    attempts: list[TaskAttemptInput]


class TaskReportsInput(BaseModel):
    reports: list[TaskReportInput]


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
