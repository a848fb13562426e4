"""Registering a lineage: session, lineage and agent v1 recorded before the first cycle, with
its inputs in order; a branch's agent, inputs and standing wishes are its parent version's."""

from __future__ import annotations

from temporalio import activity
from temporalio.exceptions import ApplicationError

from domain.agent import AgentDefinition, AgentRef
from domain.lineage import BranchOrigin, RegisterLineageInput, RegisterLineageResult
from store import Store
from store.records.lineage_records import Standing


class LineageRegistryActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="register_lineage")
    def register_lineage(self, inp: RegisterLineageInput) -> RegisterLineageResult:
        agent, inputs, standing = inp.agent, inp.inputs, Standing()
        if inp.branched_from is not None:
            agent, inputs, standing = self._parent(inp.session_id, inp.branched_from)
        if agent is None:
            raise ApplicationError("a lineage needs an agent", type="BadSpec", non_retryable=True)
        registered = self.store.recorder.register_lineage(
            session_id=inp.session_id,
            session_name=inp.session_name,
            lineage_id=inp.lineage_id,
            label=inp.label,
            workflow_id=activity.info().workflow_id,
            agent=agent,
            inputs=inputs,
            documents=[(d.name, d.content) for d in inp.documents],
            branched_from=inp.branched_from,
            standing=standing,
        )
        self.store.recorder.record_inputs(
            session_id=inp.session_id, lineage_id=inp.lineage_id, inputs=inputs
        )
        # A lineage started again after it ended resumes from its latest version and cycle;
        # a branch's standing wishes are those it started with until its first step.
        wishes, asked_for = self.store.queries.standing_wishes(inp.lineage_id, registered.version)
        return RegisterLineageResult(
            agent=AgentRef(agent_id=inp.lineage_id, version=registered.version),
            input_hashes=registered.input_hashes,
            last_cycle=registered.last_cycle,
            wishes=wishes,
            asked_for=asked_for,
        )

    def _parent(
        self, session_id: str, origin: BranchOrigin
    ) -> tuple[AgentDefinition, list[str], Standing]:
        """The version a branch starts from: its agent, its lineage's inputs and its standing
        wishes. Refused (for good) when it is not a version of this session's lineages."""
        q = self.store.queries
        parent = q.lineage(origin.lineage_id)
        if parent is None or parent.session_id != session_id:
            where = "no such lineage" if parent is None else f"it is of session {parent.session_id}"
            raise ApplicationError(
                f"cannot branch session {session_id} from {origin.lineage_id} ({where}): a "
                "branch starts from a lineage of its own session",
                type="BranchRefused",
                non_retryable=True,
            )
        try:
            agent = q.agent_definition(AgentRef(agent_id=origin.lineage_id, version=origin.version))
            inputs = q.lineage_inputs(origin.lineage_id)
        except KeyError as exc:
            raise ApplicationError(
                str(exc.args[0]), type="BranchRefused", non_retryable=True
            ) from None
        wishes, asked_for = q.standing_wishes(origin.lineage_id, origin.version)
        return agent, inputs, Standing(wishes=wishes, asked_for=asked_for)
