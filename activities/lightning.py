"""Server-side activities of Agent Lightning: everything that touches the store."""

from __future__ import annotations

import asyncio
import functools

from temporalio import activity
from temporalio.exceptions import ApplicationError

from domain.agent import AgentSnapshot
from domain.content_hash import content_hash
from domain.cycle import attempt_of
from domain.execution import Usage
from domain.lightning import (
    LLM,
    ClaimedTasks,
    ClaimInput,
    PromptTemplate,
    ProposeInput,
    ProposeResult,
    PublishInput,
    StoredSample,
    StoreSamplesInput,
    StoreTasksInput,
    TaskAttemptsInput,
    TaskReportsInput,
)
from domain.rollout_report import RolloutReport
from store import Store
from store.records.attempt_records import AttemptStart
from store.records.dataset_records import TaskReport
from store.views.dataset_view import QueuedTaskRecord
from trainer.backends import TrainerBackends
from trainer.template_optimizer import propose_from_reports


class LightningActivities:
    def __init__(self, store: Store, trainers: TrainerBackends) -> None:
        self.store = store
        self.trainers = trainers
        # a published resource set never changes: its snapshot is read once per worker
        self._snapshot = functools.lru_cache(maxsize=1024)(self._read_snapshot)

    @activity.defn(name="publish_resources")
    def publish_resources(self, inp: PublishInput) -> str:
        return self.store.recorder.publish_resources(
            server_id=inp.server_id, version=inp.version, resource_set=inp.resource_set
        )

    @activity.defn(name="store_samples")
    def store_samples(self, inp: StoreSamplesInput) -> list[StoredSample]:
        """An optimization's dataset, stored once: its samples' hashes and sizes."""
        return [
            StoredSample(sample_hash=digest, sample_bytes=size)
            for digest, size in self.store.recorder.store_samples(inp.samples)
        ]

    @activity.defn(name="store_tasks")
    def store_tasks(self, inp: StoreTasksInput) -> None:
        self.store.recorder.store_tasks(inp)

    @activity.defn(name="claim_tasks")
    def claim_tasks(self, inp: ClaimInput) -> ClaimedTasks:
        return self.store.recorder.claim_tasks(inp)

    def _queued(self, rollout_ids: list[str]) -> list[QueuedTaskRecord]:
        found = self.store.queries.queued_tasks(rollout_ids)
        missing = [r for r in rollout_ids if r not in found]
        if missing:  # a batch names only tasks it claimed: the store lost them
            raise ApplicationError(f"tasks not in the store: {missing[:5]}", non_retryable=True)
        return [found[r] for r in rollout_ids]

    @activity.defn(name="record_task_attempts_started")
    def record_task_attempts_started(self, inp: TaskAttemptsInput) -> None:
        """The attempts' snapshots: the resource set each ran with (read once per version)."""
        started: list[AttemptStart] = []
        for task in self._queued(inp.rollout_ids):
            snapshot, llm = self._snapshot(task.server_id, task.resources_version)
            started.append(
                AttemptStart(
                    session_id=task.server_id,
                    lineage_id=task.server_id,
                    rollout_id=task.rollout_id,
                    cycle=task.iteration,
                    attempt_id=attempt_of(task.rollout_id, inp.attempt),
                    attempt_number=inp.attempt,
                    snapshot=snapshot,
                    input_hash=task.sample_hash,
                    model_id=llm.model if llm else "none",
                    parameters=dict(llm.sampling_params) if llm else {},
                )
            )
        self.store.recorder.record_attempts_started(started)

    def _read_snapshot(self, server_id: str, version: int) -> tuple[AgentSnapshot, LLM | None]:
        resources = self.store.queries.resource_set(server_id, version)
        llm = next((r for r in resources.resources.values() if isinstance(r, LLM)), None)
        template = next(
            (r for r in resources.resources.values() if isinstance(r, PromptTemplate)), None
        )
        set_hash = content_hash(resources.model_dump(mode="json"))
        snapshot = AgentSnapshot(
            agent_id=server_id,
            version=version,
            system_prompt_hash=content_hash(template.template) if template else set_hash,
            tools_hash=content_hash([]),
            flow_hash=set_hash,
        )
        return snapshot, llm

    @activity.defn(name="record_task_attempts_failed")
    def record_task_attempts_failed(self, inp: TaskAttemptsInput) -> None:
        errors = inp.errors or ["unknown error"] * len(inp.rollout_ids)
        for rollout_id, error in zip(inp.rollout_ids, errors, strict=True):
            self.store.recorder.record_attempt_failed(
                session_id=inp.server_id,
                lineage_id=inp.server_id,
                attempt_id=attempt_of(rollout_id, inp.attempt),
                error=error or "unknown error",
                error_type="ClientError",
                retryable=True,
                spans=[],
                duration_ms=0,
            )

    @activity.defn(name="record_task_reports")
    def record_task_reports(self, inp: TaskReportsInput) -> None:
        """Reports that arrived together (a client activity's tasks), in one transaction."""
        reports: list[TaskReport] = []
        for one in inp.reports:
            report = one.report
            metrics = report.metrics
            reports.append(
                TaskReport(
                    server_id=inp.server_id,
                    rollout_id=report.rollout_id,
                    attempt_id=attempt_of(report.rollout_id, inp.attempt),
                    client_id=one.client_id,
                    report=report,
                    spans=one.spans,
                    usage=Usage(
                        prompt_tokens=int(metrics.get("prompt_tokens", 0)),
                        completion_tokens=int(metrics.get("completion_tokens", 0)),
                        estimated_cost=metrics.get("estimated_cost"),
                    ),
                    duration_ms=int(metrics.get("duration_ms", 0)),
                )
            )
        self.store.recorder.record_task_reports(reports)

    @activity.defn(name="propose_template")
    async def propose_template(self, inp: ProposeInput) -> ProposeResult:
        """The round's reports (read by id: they stay in the store) to the template optimizer."""
        reports: list[RolloutReport] = await asyncio.to_thread(
            self.store.queries.lightning_reports, inp.rollout_ids
        )
        backend = self.trainers.get(inp.trainer, inp.trainer_model)
        return await propose_from_reports(inp.template, reports, inp.target_reward, backend)
