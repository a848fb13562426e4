"""Server-side activities of Agent Lightning: everything that touches the store."""

from __future__ import annotations

import asyncio

from temporalio import activity

from domain.agent import AgentSnapshot
from domain.content_hash import content_hash
from domain.cycle import attempt_of
from domain.execution import Usage
from domain.lightning import (
    LLM,
    PromptTemplate,
    ProposeInput,
    ProposeResult,
    PublishInput,
    RolloutBatch,
    RolloutTask,
    TaskAttemptInput,
    TaskAttemptsInput,
    TaskReportInput,
    TaskReportsInput,
)
from domain.rollout_report import RolloutReport
from store import Store
from store.records.attempt_records import AttemptStart
from store.records.dataset_records import TaskReport
from trainer.backends import TrainerBackends
from trainer.template_optimizer import propose_from_reports


def _attempt_id(task: RolloutTask, attempt: int) -> str:
    return attempt_of(task.rollout_id, attempt)


class LightningActivities:
    def __init__(self, store: Store, trainers: TrainerBackends) -> None:
        self.store = store
        self.trainers = trainers

    @activity.defn(name="publish_resources")
    def publish_resources(self, inp: PublishInput) -> str:
        return self.store.recorder.publish_resources(
            server_id=inp.server_id, version=inp.version, resource_set=inp.resource_set
        )

    @activity.defn(name="record_task_queued")
    def record_task_queued(self, task: RolloutTask) -> None:
        self.record_tasks_queued(RolloutBatch(batch_id=task.rollout_id, tasks=[task]))

    @activity.defn(name="record_tasks_queued")
    def record_tasks_queued(self, batch: RolloutBatch) -> None:
        self.store.recorder.record_tasks_queued(batch.tasks)

    @activity.defn(name="record_task_attempt_started")
    def record_task_attempt_started(self, inp: TaskAttemptInput) -> None:
        self.record_task_attempts_started(TaskAttemptsInput(attempts=[inp]))

    @activity.defn(name="record_task_attempts_started")
    def record_task_attempts_started(self, inp: TaskAttemptsInput) -> None:
        """The attempts' snapshots: the resource set each ran with (read once per version)."""
        snapshots: dict[tuple[str, int], tuple[AgentSnapshot, LLM | None]] = {}
        started: list[AttemptStart] = []
        for one in inp.attempts:
            task = one.task
            key = (task.server_id, task.resources_version)
            if key not in snapshots:
                snapshots[key] = self._snapshot(task)
            snapshot, llm = snapshots[key]
            started.append(
                AttemptStart(
                    session_id=task.server_id,
                    lineage_id=task.server_id,
                    rollout_id=task.rollout_id,
                    cycle=task.iteration,
                    attempt_id=_attempt_id(task, one.attempt),
                    attempt_number=one.attempt,
                    snapshot=snapshot,
                    input_hash=content_hash(task.sample),
                    model_id=llm.model if llm else "none",
                    parameters=dict(llm.sampling_params) if llm else {},
                )
            )
        self.store.recorder.record_attempts_started(started)

    def _snapshot(self, task: RolloutTask) -> tuple[AgentSnapshot, LLM | None]:
        resources = self.store.queries.resource_set(task.server_id, task.resources_version)
        llm = next((r for r in resources.resources.values() if isinstance(r, LLM)), None)
        template = next(
            (r for r in resources.resources.values() if isinstance(r, PromptTemplate)), None
        )
        set_hash = content_hash(resources.model_dump(mode="json"))
        snapshot = AgentSnapshot(
            agent_id=task.server_id,
            version=task.resources_version,
            system_prompt_hash=content_hash(template.template) if template else set_hash,
            tools_hash=content_hash([]),
            flow_hash=set_hash,
        )
        return snapshot, llm

    @activity.defn(name="record_task_attempt_failed")
    def record_task_attempt_failed(self, inp: TaskAttemptInput) -> None:
        self.record_task_attempts_failed(TaskAttemptsInput(attempts=[inp]))

    @activity.defn(name="record_task_attempts_failed")
    def record_task_attempts_failed(self, inp: TaskAttemptsInput) -> None:
        for one in inp.attempts:
            self.store.recorder.record_attempt_failed(
                session_id=one.task.server_id,
                lineage_id=one.task.server_id,
                attempt_id=_attempt_id(one.task, one.attempt),
                error=one.error or "unknown error",
                error_type="ClientError",
                retryable=True,
                spans=[],
                duration_ms=0,
            )

    @activity.defn(name="record_task_report")
    def record_task_report(self, inp: TaskReportInput) -> None:
        self.record_task_reports(TaskReportsInput(reports=[inp]))

    @activity.defn(name="record_task_reports")
    def record_task_reports(self, inp: TaskReportsInput) -> None:
        """Reports that arrived together (a client activity's tasks), in one transaction."""
        reports: list[TaskReport] = []
        for one in inp.reports:
            report = one.client_report.report
            metrics = report.metrics
            reports.append(
                TaskReport(
                    server_id=one.task.server_id,
                    rollout_id=one.task.rollout_id,
                    attempt_id=_attempt_id(one.task, one.attempt),
                    client_id=one.client_report.client_id,
                    report=report,
                    spans=one.client_report.spans,
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
