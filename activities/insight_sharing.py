"""Sharing what a judged change taught with the session's other lineages: each outcome becomes
a claim in the session's shared findings (the RLM store), where a lineage reads what the others
learned (``view_others``)."""

from __future__ import annotations

from pydantic import BaseModel
from temporalio import activity

from domain.trainer import JudgedEvolution
from rlm.shared_store import WorkerStoreProxy
from store import Store
from store.rlm_findings.shared_findings import DatabaseSharedStore


class ShareOutcomeInput(BaseModel):
    session_id: str
    lineage_id: str
    judged: JudgedEvolution


class InsightSharingActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="share_outcome")
    def share_outcome(self, inp: ShareOutcomeInput) -> None:
        """Once per evolution, even if retried: the claims carry the evolution's tag."""
        shared = WorkerStoreProxy(
            DatabaseSharedStore(
                self.store.engine, f"session:{inp.session_id}", self.store.read_engine
            ),
            inp.lineage_id,
        )
        judged = inp.judged
        tag = f"evolution:{judged.evolution_id}"
        if not judged.insights or shared.shared.query(f"tag={tag}"):
            return
        for observation in judged.insights:
            shared.create(
                "claim",
                f"{observation.pattern}: {'worked' if observation.success else 'failed'}"
                f" ({judged.verdict.score_delta:+g})",
                content={
                    "insight_id": observation.insight_id,
                    "success": observation.success,
                    "score_delta": observation.score_delta,
                    "evolution_id": observation.evolution_id,
                },
                tags=[tag, "insight", f"pattern:{observation.pattern_type}"],
            )
