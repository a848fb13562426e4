"""Choosing the Master Trainer's backend: the rules engine or Claude, explicitly per lineage."""

from __future__ import annotations

from typing import Protocol

from domain.agent import AgentDefinition
from domain.execution import SpanRecord
from domain.settings import Settings
from domain.trainer import CreditAssignment, EvolutionPlan, ScoreAnalysis
from runner.claude import make_client
from trainer import credit_assignment, evolution_planner, reward_analyzer
from trainer.claude_trainer import ClaudeTrainer


class TrainerConfigError(Exception):
    """The lineage asks for a trainer this worker cannot provide (never a silent switch)."""


class TrainerBackend(Protocol):
    name: str

    async def analyze(
        self, score: float, comment: str | None, previous_scores: list[float]
    ) -> ScoreAnalysis: ...

    async def assign_credit(
        self, agent: AgentDefinition, analysis: ScoreAnalysis, spans: list[SpanRecord]
    ) -> CreditAssignment: ...

    async def propose(
        self,
        agent: AgentDefinition,
        analysis: ScoreAnalysis,
        credit: CreditAssignment,
        directives: list[str],
    ) -> EvolutionPlan: ...


class RulesTrainer:
    """The deterministic rules engine (trainer/feedback_reader.py reads the comments). It is
    synchronous: ``*_now`` run it in the caller's thread; the async methods serve the
    TrainerBackend protocol."""

    name = "rules"

    def analyze_now(
        self, score: float, comment: str | None, previous_scores: list[float]
    ) -> ScoreAnalysis:
        return reward_analyzer.analyze(score, comment, previous_scores)

    def assign_credit_now(
        self, agent: AgentDefinition, analysis: ScoreAnalysis, spans: list[SpanRecord]
    ) -> CreditAssignment:
        return credit_assignment.assign(agent, analysis, spans)

    def propose_now(
        self, agent: AgentDefinition, analysis: ScoreAnalysis, credit: CreditAssignment
    ) -> EvolutionPlan:
        # directives are applied mechanically by evolution_planner.finalize for every backend
        return evolution_planner.propose(agent, analysis, credit)

    async def analyze(
        self, score: float, comment: str | None, previous_scores: list[float]
    ) -> ScoreAnalysis:
        return self.analyze_now(score, comment, previous_scores)

    async def assign_credit(
        self, agent: AgentDefinition, analysis: ScoreAnalysis, spans: list[SpanRecord]
    ) -> CreditAssignment:
        return self.assign_credit_now(agent, analysis, spans)

    async def propose(
        self,
        agent: AgentDefinition,
        analysis: ScoreAnalysis,
        credit: CreditAssignment,
        directives: list[str],
    ) -> EvolutionPlan:
        return self.propose_now(agent, analysis, credit)


class TrainerBackends:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._rules = RulesTrainer()
        self._claude: dict[str, ClaudeTrainer] = {}

    @property
    def rules(self) -> RulesTrainer:
        return self._rules

    def get(self, name: str, model: str) -> TrainerBackend:
        if name == "rules":
            return self._rules
        if self._settings.anthropic_api_key is None:
            raise TrainerConfigError(
                "this lineage's trainer is 'claude', but ANTHROPIC_API_KEY is not set on this "
                "worker (set it, or use trainer: rules)"
            )
        if model not in self._claude:
            client = make_client(
                self._settings.anthropic_api_key.get_secret_value(),
                self._settings.anthropic_base_url,
                self._settings.anthropic_max_retries,
            )
            self._claude[model] = ClaudeTrainer(client, model)
        return self._claude[model]
