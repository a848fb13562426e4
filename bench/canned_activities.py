"""The lineage's activities with canned answers and no work, for the orchestration bench: run
under them, LineageWorkflow costs what Temporal and the workflow's own logic cost, without the
store, the runner and the trainer (see bench/lineage_load.py, part 1)."""

from __future__ import annotations

from temporalio import activity

from domain.agent import AgentRef
from domain.lineage import (
    ApplyEvolutionResult,
    RecordScoreInput,
    RegisterLineageInput,
    RegisterLineageResult,
    RunAgentInput,
    RunAgentResult,
    ScoreAndTrainInput,
    ScoreAndTrainResult,
    TrainerInput,
)
from domain.trainer import EvolutionOutcome


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


@activity.defn(name="record_score")
def record_score(inp: RecordScoreInput) -> EvolutionOutcome | None:
    return None


@activity.defn(name="train")
def train(inp: TrainerInput) -> ApplyEvolutionResult:
    return ApplyEvolutionResult(evolution_id=None, agent=inp.agent, changes=0, summary="kept")


@activity.defn(name="record_score_and_train")
def record_score_and_train(inp: ScoreAndTrainInput) -> ScoreAndTrainResult:
    return ScoreAndTrainResult(applied=train(inp.trainer))


ALL = [register_lineage, run_agent, record_score, train, record_score_and_train]
