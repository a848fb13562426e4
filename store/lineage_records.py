"""Records of sessions, lineages and agent versions: registration, evolutions, kept agents."""

from __future__ import annotations

from domain.agent import AgentDefinition, AgentRef
from domain.trainer import (
    CreditAssignment,
    EvolutionChange,
    EvolutionPlan,
    EvolutionTrigger,
    ScoreAnalysis,
)
from store import payload_store
from store.event_log import NewEvent
from store.event_writer import EventWriter, now_ms


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
        documents: list[tuple[str, str]] = (),  # type: ignore[assignment]
    ) -> list[str]:
        """Record the session, the lineage and agent v1; returns the inputs' content hashes."""
        ts = now_ms()
        definition = agent.model_dump(mode="json")
        hashes = agent.hashes()
        input_hashes = [payload_store.encode(text)[0] for text in inputs]
        refs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        events = [
            NewEvent.keyed(
                "session.created",
                session_id,
                {"sessionId": session_id, "name": session_name},
                session_id=session_id,
                timestamp=ts,
            ),
            NewEvent.keyed(
                "lineage.created",
                lineage_id,
                {
                    "sessionId": session_id,
                    "lineageId": lineage_id,
                    "label": label,
                    "workflowId": workflow_id,
                },
                **refs,
            ),
            NewEvent.keyed(
                "agent.created",
                f"{lineage_id}@1",
                {
                    "agentId": lineage_id,
                    "lineageId": lineage_id,
                    "version": 1,
                    "definitionHash": payload_store.encode(definition)[0],
                    "systemPromptHash": hashes.system_prompt_hash,
                    "toolsHash": hashes.tools_hash,
                    "flowHash": hashes.flow_hash,
                },
                agent_id=lineage_id,
                **refs,
            ),
        ]
        for name, content in documents:
            digest = payload_store.encode(content)[0]
            events.append(
                NewEvent.keyed(
                    "session.document_added",
                    f"{session_id}/{name}/{digest}",
                    {"sessionId": session_id, "name": name, "contentHash": digest},
                    session_id=session_id,
                    timestamp=ts,
                )
            )
        contents = [content for _, content in documents]
        self._write(events, [definition, *agent.hashed_components(), *inputs, *contents])
        return input_hashes

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
        applied_insights: list[tuple[str, EvolutionChange]] = (),  # type: ignore[assignment]
    ) -> AgentRef:
        ts = now_ms()
        definition = new_agent.model_dump(mode="json")
        hashes = new_agent.hashes()
        to_version = from_version + 1
        event = NewEvent.keyed(
            "agent.evolved",
            evolution_id,
            {
                "agentId": lineage_id,
                "evolutionId": evolution_id,
                "fromVersion": from_version,
                "toVersion": to_version,
                "definitionHash": payload_store.encode(definition)[0],
                "systemPromptHash": hashes.system_prompt_hash,
                "toolsHash": hashes.tools_hash,
                "flowHash": hashes.flow_hash,
                "changes": [c.model_dump(mode="json") for c in changes],
                "hypothesis": plan.hypothesis,
                "trigger": trigger.model_dump(mode="json"),
                "scoreAnalysis": analysis.model_dump(mode="json"),
                "creditAssignment": credit.model_dump(mode="json"),
                "plan": plan.model_dump(mode="json"),
                "kind": kind,
            },
            session_id=session_id,
            lineage_id=lineage_id,
            agent_id=lineage_id,
            timestamp=ts,
            tags=["evolution"] if kind == "evolution" else ["evolution", kind],
        )
        applied = [
            NewEvent.keyed(
                "insight.applied",
                f"{insight_id}/{evolution_id}",
                {
                    "insightId": insight_id,
                    "agentId": lineage_id,
                    "evolutionId": evolution_id,
                    "change": change.model_dump(mode="json"),
                },
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
                NewEvent.keyed(
                    "evolution.kept",
                    f"{lineage_id}:{trigger.evaluation_id}",
                    {
                        "agentId": lineage_id,
                        "version": version,
                        "trigger": trigger.model_dump(mode="json"),
                        "scoreAnalysis": analysis.model_dump(mode="json"),
                        "plan": plan.model_dump(mode="json"),
                    },
                    session_id=session_id,
                    lineage_id=lineage_id,
                    agent_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )
