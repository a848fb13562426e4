"""Records of sessions, lineages and agent versions: registration, evolutions, kept agents."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import bindparam, func, select

from domain.agent import AgentDefinition, AgentRef
from domain.checks import ActiveWish
from domain.events import (
    AgentCreated,
    AgentEvolved,
    DocumentAdded,
    EvolutionKept,
    InputsSet,
    InsightApplied,
    LineageBranched,
    LineageCreated,
    LoggedChange,
    LoggedCreditAssignment,
    LoggedPlan,
    LoggedScoreAnalysis,
    LoggedTrigger,
    LoggedWish,
    SessionCreated,
    WishesStanding,
)
from domain.lineage import BranchOrigin
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


@dataclass(frozen=True)
class Standing:
    """The wishes a lineage's outputs are checked against after a step, and the families no
    change may take away: recorded with the version they stand on."""

    wishes: Sequence[ActiveWish] = ()
    asked_for: Sequence[str] = ()


def _standing(
    standing: Standing, version: int, key: str, refs: EventRefs, agent_id: str
) -> NewEvent:
    return NewEvent.of(
        WishesStanding(
            version=version,
            wishes=[LoggedWish.of(w) for w in standing.wishes],
            asked_for=list(standing.asked_for),
        ),
        key,
        agent_id=agent_id,
        **refs,
    )


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
        branched_from: BranchOrigin | None = None,
        standing: Standing | None = None,
    ) -> Registration:
        """Record the session, the lineage and agent v1 (once: registering again records
        nothing), and say where the lineage picks up. A branch's first event names the version
        it starts from (``agent`` is that version, ``standing`` its standing wishes)."""
        ts = now_ms()
        definition = agent.model_dump(mode="json")
        definition_hash = payload_store.encode(definition)[0]
        hashes = agent.hashes()
        input_hashes = [payload_store.encode(text)[0] for text in inputs]
        refs: EventRefs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        events = [
            NewEvent.of(
                SessionCreated(session_id=session_id, name=session_name),
                session_id,
                session_id=session_id,
                timestamp=ts,
            )
        ]
        if branched_from is not None:
            events.append(
                NewEvent.of(
                    LineageBranched(
                        session_id=session_id,
                        lineage_id=lineage_id,
                        label=label,
                        workflow_id=workflow_id,
                        parent_lineage_id=branched_from.lineage_id,
                        parent_version=branched_from.version,
                        definition_hash=definition_hash,
                        rater=branched_from.rater,
                    ),
                    lineage_id,
                    **refs,
                )
            )
        events += [
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
                    definition_hash=definition_hash,
                    system_prompt_hash=hashes.system_prompt_hash,
                    tools_hash=hashes.tools_hash,
                    flow_hash=hashes.flow_hash,
                ),
                f"{lineage_id}@1",
                agent_id=lineage_id,
                **refs,
            ),
        ]
        if branched_from is not None:
            events.append(
                _standing(standing or Standing(), 1, f"{lineage_id}@1:wishes", refs, lineage_id)
            )
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

    def record_standing(
        self, *, session_id: str, lineage_id: str, version: int, key: str, standing: Standing
    ) -> None:
        """Wishes a step changed on a version it kept (a corrected reading that makes the same
        agent again), under ``key``."""
        refs: EventRefs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "timestamp": now_ms(),
        }
        self._write([_standing(standing, version, key, refs, lineage_id)])

    def record_inputs(self, *, session_id: str, lineage_id: str, inputs: list[str]) -> None:
        """The lineage's cycle inputs in order, once per list (registering again with the same
        inputs records nothing; with others, the later list is the lineage's)."""
        hashes = [payload_store.encode(text)[0] for text in inputs]
        digest = payload_store.encode(hashes)[0]
        self._write(
            [
                NewEvent.of(
                    InputsSet(input_hashes=hashes),
                    f"{lineage_id}/inputs/{digest}",
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                )
            ],
            list(inputs),
        )

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
        standing: Standing | None = None,
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
        if standing is not None:
            refs: EventRefs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
            applied.append(
                _standing(standing, to_version, f"{evolution_id}:wishes", refs, lineage_id)
            )
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
        standing: Standing | None = None,
    ) -> None:
        """A training step that changed nothing, with the plan's notes and history checks."""
        key = f"{lineage_id}:{trigger.evaluation_id}"
        refs: EventRefs = {
            "session_id": session_id,
            "lineage_id": lineage_id,
            "timestamp": now_ms(),
        }
        events = [
            NewEvent.of(
                EvolutionKept(
                    agent_id=lineage_id,
                    version=version,
                    trigger=LoggedTrigger.of(trigger),
                    score_analysis=LoggedScoreAnalysis.of(analysis),
                    plan=LoggedPlan.of(plan),
                ),
                key,
                agent_id=lineage_id,
                **refs,
            )
        ]
        if standing is not None:
            events.append(_standing(standing, version, f"{key}:wishes", refs, lineage_id))
        self._write(events)
