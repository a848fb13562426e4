"""Choosing the Master Trainer's backend: the rules engine or Claude, explicitly per lineage."""

from __future__ import annotations

import asyncio
from typing import Protocol

from domain import wants
from domain.agent import AgentDefinition
from domain.execution import SpanRecord
from domain.settings import Settings
from domain.trainer import CreditAssignment, EvolutionPlan, ScoreAnalysis
from runner.claude import make_client
from trainer import credit_assignment, evolution_planner, reward_analyzer
from trainer.claude_trainer import ClaudeTrainer
from trainer.reading.memory import ReadingMemory, worked_examples


class TrainerConfigError(Exception):
    """The lineage asks for a trainer this worker cannot provide (never a silent switch)."""


class TrainerBackend(Protocol):
    """A Master Trainer backend. Callers tell backends apart by what they do (the attributes
    below), never by ``name``, which is for people (logs, reports, the evaluation's files)."""

    name: str
    # Its reading of a comment is the rules engine's, which the cycle step has already made:
    # that reading is reused rather than read a second time.
    reads_with_rules: bool
    # The rules engine reads every comment and hands the ones it cannot act on to Claude: a
    # comment Claude read that way is reported as handed over.
    hands_over: bool

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
    """The deterministic rules engine (trainer/reading/reader.py reads the comments). It is
    synchronous: ``*_now`` run it in the caller's thread; the async methods serve the
    TrainerBackend protocol."""

    name = "rules"
    reads_with_rules = True
    hands_over = False

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


HAND_OVER_BELOW = 7  # a score under this whose comment the rules cannot read goes to Claude
CONFIDENT = 0.7  # a wish read with less confidence than this is not the rules engine's to act on


def rules_cannot_read(analysis: ScoreAnalysis) -> bool:
    """Whether a comment is beyond the rules engine: a critical comment in which it found
    nothing to act on (or only wishes it is unsure of), in which it found no approval, and
    which neither spoke to the trainer nor asked for powers."""
    if not (analysis.comment or "").strip() or analysis.adversarial or analysis.refused:
        return False
    wishes = [a for a in analysis.aspects if a.sentiment == "negative" and a.want]
    approved = [a for a in analysis.aspects if a.sentiment == "positive" and a.want]
    if approved or any(a.action == "remove" for a in wishes):
        return False
    if wishes:
        return all(a.confidence < CONFIDENT for a in wishes)
    return analysis.score < HAND_OVER_BELOW


class HandOverTrainer:
    """``rules+claude``: the rules engine reads every comment, and hands only those it cannot
    read to Claude — a user with a key pays for the hard comments only. Which of the two read a
    comment travels with its analysis (``read_by``), so credit and planning follow it."""

    name = "rules+claude"
    reads_with_rules = False
    hands_over = True

    def __init__(self, rules: RulesTrainer, claude: ClaudeTrainer) -> None:
        self.rules = rules
        self.claude = claude

    def _for(self, analysis: ScoreAnalysis) -> TrainerBackend:
        return self.claude if analysis.read_by == "claude" else self.rules

    async def analyze(
        self,
        score: float,
        comment: str | None,
        previous_scores: list[float],
        memory: ReadingMemory | None = None,
    ) -> ScoreAnalysis:
        # the rules engine's reading is CPU work: off the event loop, which answers meanwhile
        read = await asyncio.to_thread(
            reward_analyzer.analyze, score, comment, previous_scores, memory=memory
        )
        if rules_cannot_read(read) and not read.unsure:
            return await self.claude.analyze(score, comment, previous_scores)
        if not read.unsure:
            return read
        # only what the rules engine abstained on goes to Claude, with the corrections most
        # like it as worked examples
        clauses = [u.quote for u in read.unsure]
        examples = worked_examples(memory, clauses)
        readings = await self.claude.read_clauses(score, clauses, examples)
        added = [
            wants.parse(w).model_copy(update={"quote": clause[: reward_analyzer.QUOTE_CHARS]})
            for clause, found in readings.items()
            for w in found
        ]
        return read.model_copy(
            update={
                "aspects": [*read.aspects, *added],
                "unsure": [u for u in read.unsure if u.quote not in readings],
                "handed_over": [c for c in clauses if c in readings],
            }
        )

    async def assign_credit(
        self, agent: AgentDefinition, analysis: ScoreAnalysis, spans: list[SpanRecord]
    ) -> CreditAssignment:
        return await self._for(analysis).assign_credit(agent, analysis, spans)

    async def propose(
        self,
        agent: AgentDefinition,
        analysis: ScoreAnalysis,
        credit: CreditAssignment,
        directives: list[str],
    ) -> EvolutionPlan:
        return await self._for(analysis).propose(agent, analysis, credit, directives)


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
                f"this lineage's trainer is {name!r}, but ANTHROPIC_API_KEY is not set on this "
                "worker (set it, or use trainer: rules)"
            )
        if name == "rules+claude":
            return HandOverTrainer(self._rules, self._claude_for(model))
        return self._claude_for(model)

    def _claude_for(self, model: str) -> ClaudeTrainer:
        key = self._settings.anthropic_api_key
        assert key is not None  # checked by ``get``
        if model not in self._claude:
            client = make_client(
                key.get_secret_value(),
                self._settings.anthropic_base_url,
                self._settings.anthropic_max_retries,
            )
            self._claude[model] = ClaudeTrainer(client, model)
        return self._claude[model]
