"""Records of sessions, lineages and agent versions: registration, evolutions, kept agents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select

from domain.agent import AgentDefinition, AgentRef
from domain.events import (
    AgentCreated,
    AgentEvolved,
    DocumentAdded,
    EvolutionKept,
    InsightApplied,
    LineageCreated,
    LoggedChange,
    LoggedCreditAssignment,
    LoggedPlan,
    LoggedScoreAnalysis,
    LoggedTrigger,
    SessionCreated,
)
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
)
from store.eventstore import payload_store
from store.eventstore.event_log import EventRefs, NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.tables import AgentVersionRow, RolloutRow

_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]
_rollouts = RolloutRow.__table__  # type: ignore[attr-defined]
# a lineage's latest agent version and the last cycle it rolled out, in one indexed statement
_RESUME_POINT = select(
    select(func.max(_versions.c.version))
    .where(_versions.c.lineage_id == bindparam("lineage_id"))
    .scalar_subquery(),
    select(func.max(_rollouts.c.cycle))
    .where(_rollouts.c.lineage_id == bindparam("lineage_id"))
    .scalar_subquery(),
)


@dataclass(frozen=True)
class Registration:
    """A registered lineage: its inputs' content hashes, and where it picks up: its latest
    agent version (1 when new) and the last cycle it rolled out (0 when new). A lineage
    started again after it ended resumes from there."""

    input_hashes: list[str]
    version: int
    last_cycle: int


class LineageRecords(EventWriter):
    """Sessions, lineages, agent versions."""

    def register_lineage(
        self,
        *,
        session_id: str,
        session_name: str,
        lineage_id: str,
        label: str,
        workflow_id: str,
        agent: AgentDefinition,
        inputs: list[str],
        documents: Sequence[tuple[str, str]] = (),
    ) -> Registration:
        """Record the session, the lineage and agent v1 (once: registering again records
        nothing), and say where the lineage picks up."""
        ts = now_ms()
        definition = agent.model_dump(mode="json")
        hashes = agent.hashes()
        input_hashes = [payload_store.encode(text)[0] for text in inputs]
        refs: EventRefs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        events = [
            NewEvent.of(
                SessionCreated(session_id=session_id, name=session_name),
                session_id,
                session_id=session_id,
                timestamp=ts,
            ),
            NewEvent.of(
                LineageCreated(
                    session_id=session_id,
                    lineage_id=lineage_id,
                    label=label,
                    workflow_id=workflow_id,
                ),
                lineage_id,
                **refs,
            ),
            NewEvent.of(
                AgentCreated(
                    agent_id=lineage_id,
                    lineage_id=lineage_id,
                    version=1,
                    definition_hash=payload_store.encode(definition)[0],
                    system_prompt_hash=hashes.system_prompt_hash,
                    tools_hash=hashes.tools_hash,
                    flow_hash=hashes.flow_hash,
                ),
                f"{lineage_id}@1",
                agent_id=lineage_id,
                **refs,
            ),
        ]
        for name, content in documents:
            digest = payload_store.encode(content)[0]
            events.append(
                NewEvent.of(
                    DocumentAdded(session_id=session_id, name=name, content_hash=digest),
                    f"{session_id}/{name}/{digest}",
                    session_id=session_id,
                    timestamp=ts,
                )
            )
        contents = [content for _, content in documents]
        version, cycle = self._write_then_read(
            events,
            [definition, *agent.hashed_components(), *inputs, *contents],
            lambda conn: conn.execute(_RESUME_POINT, {"lineage_id": lineage_id}).one(),
        )
        return Registration(input_hashes=input_hashes, version=version, last_cycle=cycle or 0)

    def record_evolution(
        self,
        *,
        session_id: str,
        lineage_id: str,
        evolution_id: str,
        from_version: int,
        new_agent: AgentDefinition,
        trigger: EvolutionTrigger,
        analysis: ScoreAnalysis,
        credit: CreditAssignment,
        plan: EvolutionPlan,
        changes: list[EvolutionChange],
        kind: str = "evolution",
        applied_insights: Sequence[tuple[str, EvolutionChange]] = (),
    ) -> AgentRef:
        ts = now_ms()
        definition = new_agent.model_dump(mode="json")
        hashes = new_agent.hashes()
        to_version = from_version + 1
        event = NewEvent.of(
            AgentEvolved(
                agent_id=lineage_id,
                evolution_id=evolution_id,
                from_version=from_version,
                to_version=to_version,
                definition_hash=payload_store.encode(definition)[0],
                system_prompt_hash=hashes.system_prompt_hash,
                tools_hash=hashes.tools_hash,
                flow_hash=hashes.flow_hash,
                changes=[LoggedChange.of(c) for c in changes],
                hypothesis=plan.hypothesis,
                trigger=LoggedTrigger.of(trigger),
                score_analysis=LoggedScoreAnalysis.of(analysis),
                credit_assignment=LoggedCreditAssignment.of(credit),
                plan=LoggedPlan.of(plan),
                kind=kind,
            ),
            evolution_id,
            session_id=session_id,
            lineage_id=lineage_id,
            agent_id=lineage_id,
            timestamp=ts,
            tags=["evolution"] if kind == "evolution" else ["evolution", kind],
        )
        applied = [
            NewEvent.of(
                InsightApplied(
                    insight_id=insight_id,
                    agent_id=lineage_id,
                    evolution_id=evolution_id,
                    change=LoggedChange.of(change),
                ),
                f"{insight_id}/{evolution_id}",
                session_id=session_id,
                lineage_id=lineage_id,
                agent_id=lineage_id,
                timestamp=ts,
            )
            for insight_id, change in applied_insights
        ]
        self._write([event, *applied], [definition, *new_agent.hashed_components()])
        return AgentRef(agent_id=lineage_id, version=to_version)

    def record_kept(
        self,
        *,
        session_id: str,
        lineage_id: str,
        version: int,
        trigger: EvolutionTrigger,
        analysis: ScoreAnalysis,
        plan: EvolutionPlan,
    ) -> None:
        """A training step that changed nothing, with the plan's notes and history checks."""
        self._write(
            [
                NewEvent.of(
                    EvolutionKept(
                        agent_id=lineage_id,
                        version=version,
                        trigger=LoggedTrigger.of(trigger),
                        score_analysis=LoggedScoreAnalysis.of(analysis),
                        plan=LoggedPlan.of(plan),
                    ),
                    f"{lineage_id}:{trigger.evaluation_id}",
                    session_id=session_id,
                    lineage_id=lineage_id,
                    agent_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )
