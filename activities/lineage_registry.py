"""Registering a lineage: session, lineage and agent v1 recorded before the first cycle."""

from __future__ import annotations

from temporalio import activity

from domain.agent import AgentRef
from domain.lineage import RegisterLineageInput, RegisterLineageResult
from store import Store


class LineageRegistryActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="register_lineage")
    def register_lineage(self, inp: RegisterLineageInput) -> RegisterLineageResult:
        registered = self.store.recorder.register_lineage(
            session_id=inp.session_id,
            session_name=inp.session_name,
            lineage_id=inp.lineage_id,
            label=inp.label,
            workflow_id=activity.info().workflow_id,
            agent=inp.agent,
            inputs=inp.inputs,
            documents=[(d.name, d.content) for d in inp.documents],
        )
        # A lineage started again after it ended resumes from its latest version and cycle.
        return RegisterLineageResult(
            agent=AgentRef(agent_id=inp.lineage_id, version=registered.version),
            input_hashes=registered.input_hashes,
            last_cycle=registered.last_cycle,
        )
