"""Recording human feedback: scores (with the outcome of the evolution they judge), rejected
signals, directives and locks."""

from __future__ import annotations

import json

from temporalio import activity

from domain.lineage import (
    RecordDirectiveInput,
    RecordLockInput,
    RecordRejectionInput,
    RecordScoreInput,
)
from domain.trainer import EvolutionChange, EvolutionOutcome, ExpectedImpact
from rlm.shared_store import WorkerStoreProxy
from store import Store
from store.recorder import InsightObservation
from store.shared_findings import DatabaseSharedStore
from trainer import outcome, reward_analyzer
from trainer.change_family import insight_id, pattern


class FeedbackActivities:
    def __init__(self, store: Store) -> None:
        self.store = store

    @activity.defn(name="record_score")
    def record_score(self, inp: RecordScoreInput) -> EvolutionOutcome | None:
        judged: tuple[str, EvolutionOutcome] | None = None
        observations: list[InsightObservation] = []
        if inp.pending_evolution_id:
            record = self.store.queries.evolution_record(inp.pending_evolution_id)
            if record is not None:
                plan = json.loads(record.plan)
                expected = [ExpectedImpact.model_validate(e) for e in plan["expected_impact"]]
                # Judging stays mechanical whatever the trainer backend: the aspects the plan
                # named, read from the new comment, and the score delta.
                analysis = reward_analyzer.analyze(
                    inp.score.score, inp.score.comment, [record.trigger_score]
                )
                changes = [EvolutionChange.model_validate(c) for c in json.loads(record.changes)]
                verdict = outcome.judge(record.trigger_score, expected, analysis, changes)
                judged = (inp.pending_evolution_id, verdict)
                contexts = sorted(
                    f"{a['aspect']}:{a.get('want') or a['sentiment']}"
                    for a in json.loads(record.score_analysis)["aspects"]
                )
                for change in changes:
                    family, family_type = pattern(change)
                    observations.append(
                        InsightObservation(
                            insight_id=insight_id(inp.session_id, family),
                            pattern=family,
                            pattern_type=family_type,
                            contexts=contexts,
                            evolution_id=inp.pending_evolution_id,
                            # a change succeeds when its own aspect was validated (a change
                            # with no aspect shares the whole hypothesis's fate)
                            success=_aspect_validated(verdict, change.aspect),
                            score_delta=verdict.score_delta,
                        )
                    )
        self.store.recorder.record_score(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            evaluation_id=inp.evaluation_id,
            artifact_id=inp.artifact_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            agent_version=inp.agent_version,
            score=inp.score.score,
            comment=inp.score.comment,
            rater=inp.score.rater,
            outcome=judged,
            insights=observations,
        )
        if judged is not None:
            self._share(inp, judged[1], observations)
        return judged[1] if judged else None

    def _share(
        self, inp: RecordScoreInput, verdict: EvolutionOutcome, seen: list[InsightObservation]
    ) -> None:
        """Publish the outcome to the session's shared findings, where every lineage reads
        what the others learned (``view_others``). Once per evolution, even if retried."""
        shared = WorkerStoreProxy(
            DatabaseSharedStore(
                self.store.engine, f"session:{inp.session_id}", self.store.read_engine
            ),
            inp.lineage_id,
        )
        tag = f"evolution:{inp.pending_evolution_id}"
        if shared.shared.query(f"tag={tag}"):
            return
        for observation in seen:
            shared.create(
                "claim",
                f"{observation.pattern}: {'worked' if verdict.hypothesis_validated else 'failed'}"
                f" ({verdict.score_delta:+g})",
                content={
                    "insight_id": observation.insight_id,
                    "success": observation.success,
                    "score_delta": observation.score_delta,
                    "evolution_id": observation.evolution_id,
                },
                tags=[tag, "insight", f"pattern:{observation.pattern_type}"],
            )

    @activity.defn(name="record_rejection")
    def record_rejection(self, inp: RecordRejectionInput) -> None:
        self.store.recorder.record_rejection(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            rejection_id=inp.rejection_id,
            cycle=inp.cycle,
            kind=inp.kind,
            payload_preview=inp.payload_preview,
            reason=inp.reason,
        )

    @activity.defn(name="record_directive")
    def record_directive(self, inp: RecordDirectiveInput) -> None:
        self.store.recorder.record_directive(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            directive_id=inp.directive_id,
            cycle=inp.cycle,
            kind=inp.kind,
            content=inp.content,
        )

    @activity.defn(name="record_lock")
    def record_lock(self, inp: RecordLockInput) -> None:
        competitors = {
            lineage_id: score
            for lineage_id, score in self.store.queries.latest_scores(inp.session_id).items()
            if lineage_id != inp.lineage_id
        }
        self.store.recorder.record_lock(
            session_id=inp.session_id,
            lineage_id=inp.lineage_id,
            event_key=inp.event_key,
            cycle=inp.cycle,
            locked=inp.locked,
            reason=inp.reason,
            competitor_scores=competitors,
        )


def _aspect_validated(verdict: EvolutionOutcome, aspect: str | None) -> bool:
    for judged in verdict.aspects:
        if judged.aspect == aspect:
            return judged.verdict == "validated"
    return verdict.hypothesis_validated
