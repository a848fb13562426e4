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
    RolloutTask,
    TaskAttemptInput,
    TaskReportInput,
)
from domain.rollout_report import RolloutReport
from store import Store
from trainer.backends import TrainerBackends
from trainer.template_optimizer import propose_template


def _attempt_id(task: RolloutTask, attempt: int) -> str:
    return attempt_of(task.rollout_id, attempt)


class LightningActivities:
    def __init__(self, store: Store, trainers: TrainerBackends) -> None:
        self.store = store
        self.trainers = trainers

    @activity.defn(name="publish_resources")
    def publish_resources(self, inp: PublishInput) -> str:
        return self.store.recorder.publish_resources(
            server_id=inp.server_id,
            version=inp.version,
            resources=inp.resource_set.model_dump(mode="json"),
        )

    @activity.defn(name="record_task_queued")
    def record_task_queued(self, task: RolloutTask) -> None:
        self.store.recorder.record_task_queued(
            server_id=task.server_id,
            rollout_id=task.rollout_id,
            iteration=task.iteration,
            sample=task.sample,
            resources_version=task.resources_version,
        )

    @activity.defn(name="record_task_attempt_started")
    def record_task_attempt_started(self, inp: TaskAttemptInput) -> None:
        task = inp.task
        resources = self.store.queries.resource_set(task.server_id, task.resources_version)
        llm = next((r for r in resources.resources.values() if isinstance(r, LLM)), None)
        template = next(
            (r for r in resources.resources.values() if isinstance(r, PromptTemplate)), None
        )
        set_hash = content_hash(resources.model_dump(mode="json"))
        self.store.recorder.record_attempt_started(
            session_id=task.server_id,
            lineage_id=task.server_id,
            rollout_id=task.rollout_id,
            cycle=task.iteration,
            attempt_id=_attempt_id(task, inp.attempt),
            attempt_number=inp.attempt,
            snapshot=AgentSnapshot(
                agent_id=task.server_id,
                version=task.resources_version,
                system_prompt_hash=content_hash(template.template) if template else set_hash,
                tools_hash=content_hash([]),
                flow_hash=set_hash,
            ),
            input_hash=content_hash(task.sample),
            model_id=llm.model if llm else "none",
            parameters=dict(llm.sampling_params) if llm else {},
        )

    @activity.defn(name="record_task_attempt_failed")
    def record_task_attempt_failed(self, inp: TaskAttemptInput) -> None:
        self.store.recorder.record_attempt_failed(
            session_id=inp.task.server_id,
            lineage_id=inp.task.server_id,
            attempt_id=_attempt_id(inp.task, inp.attempt),
            error=inp.error or "unknown error",
            error_type="ClientError",
            retryable=True,
            spans=[],
            duration_ms=0,
        )

    @activity.defn(name="record_task_report")
    def record_task_report(self, inp: TaskReportInput) -> None:
        report = inp.client_report.report
        metrics = report.metrics
        self.store.recorder.record_task_report(
            server_id=inp.task.server_id,
            rollout_id=inp.task.rollout_id,
            attempt_id=_attempt_id(inp.task, inp.attempt),
            client_id=inp.client_report.client_id,
            report=report.model_dump(mode="json"),
            final_reward=report.final_reward,
            spans=inp.client_report.spans,
            usage=Usage(
                prompt_tokens=int(metrics.get("prompt_tokens", 0)),
                completion_tokens=int(metrics.get("completion_tokens", 0)),
                estimated_cost=metrics.get("estimated_cost"),
            ),
            duration_ms=int(metrics.get("duration_ms", 0)),
        )

    @activity.defn(name="propose_template")
    async def propose_template(self, inp: ProposeInput) -> ProposeResult:
        reports: list[RolloutReport] = await asyncio.to_thread(
            self.store.queries.lightning_reports, inp.rollout_ids
        )
        low = [r for r in reports if (r.final_reward or 0.0) < inp.target_reward]
        feedback = [line for r in low for line in (r.logs or [])]
        rewards = [r.final_reward or 0.0 for r in low]
        backend = self.trainers.get(inp.trainer, inp.trainer_model)
        template, plan = await propose_template(inp.template, rewards, feedback, backend)
        changed = template.template != inp.template.template
        summary = (
            "; ".join(f"{c.change_type} {c.after or c.before!r}" for c in plan.changes)
            if changed
            else "; ".join(plan.notes) or "no change proposed"
        )
        return ProposeResult(template=template, changed=changed, summary=summary)
