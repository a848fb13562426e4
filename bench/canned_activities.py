"""The lineage's activities with canned answers and no work, for the orchestration bench: run
under them, LineageWorkflow costs what Temporal and the workflow's own logic cost, without the
store, the runner and the trainer (see bench/lineage_load.py, part 1)."""

from __future__ import annotations

from temporalio import activity

from activities.cycle_records import RecordCycleStepInput
from domain.agent import AgentRef
from domain.cycle_decision import CycleDecision
from domain.lineage import (
    CycleStepInput,
    CycleStepResult,
    RegisterLineageInput,
    RegisterLineageResult,
    RunAgentInput,
    RunAgentResult,
)


@activity.defn(name="register_lineage")
def register_lineage(inp: RegisterLineageInput) -> RegisterLineageResult:
    return RegisterLineageResult(
        agent=AgentRef(agent_id=inp.lineage_id, version=1), input_hashes=["canned"]
    )


@activity.defn(name="run_agent")
async def run_agent(inp: RunAgentInput) -> RunAgentResult:
    return RunAgentResult(
        rollout_id=inp.rollout_id,
        attempt_id=f"{inp.rollout_id}:a1",
        artifact_id=f"{inp.rollout_id}:artifact",
        output_preview="- a canned output, as short as the offline model's",
        output_chars=48,
        output_words=9,
        total_tokens=60,
    )


@activity.defn(name="take_cycle_step")
async def take_cycle_step(inp: CycleStepInput) -> CycleDecision:
    return CycleDecision(summary="kept")


@activity.defn(name="record_cycle_step")
def record_cycle_step(inp: RecordCycleStepInput) -> CycleStepResult:
    return CycleStepResult(agent=inp.step.agent, summary=inp.decision.summary)


ALL = [register_lineage, run_agent, take_cycle_step, record_cycle_step]
