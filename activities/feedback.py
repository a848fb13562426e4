"""Recording human feedback: scores (with the verdict on the evolution they judge, reached by
the judging step), rejected signals, directives and locks."""

from __future__ import annotations

from temporalio import activity

from activities.error_classification import is_transient
from activities.trainer import TrainerActivities, judge_pending
from domain.lineage import (
    RecordDirectiveInput,
    RecordLockInput,
    RecordRejectionInput,
    RecordScoreInput,
    ScoreAndTrainInput,
    ScoreAndTrainResult,
)
from domain.trainer import EvolutionOutcome, JudgedEvolution
from rlm.shared_store import WorkerStoreProxy
from runner.redaction import redact
from store import Store
from store.shared_findings import DatabaseSharedStore

TRAINING_ERROR_CHARS = 500


class FeedbackActivities:
    def __init__(self, store: Store, trainer: TrainerActivities) -> None:
        self.store = store
        self.trainer = trainer

    @activity.defn(name="record_score")
    def record_score(self, inp: RecordScoreInput) -> EvolutionOutcome | None:
        """Record the score, with the verdict on the evolution it judges (one transaction)."""
        judged = inp.judged
        if judged is None and inp.pending_evolution_id:
            # a run from before judging was a step of its own: judge here, as it used to
            judged = judge_pending(self.store, inp.session_id, inp.pending_evolution_id, inp.score)
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
            outcome=(judged.evolution_id, judged.verdict) if judged else None,
            insights=judged.insights if judged else [],
        )
        if judged is None:
            return None
        self._share(inp, judged)
        return judged.verdict

    @activity.defn(name="record_score_and_train")
    def record_score_and_train(self, inp: ScoreAndTrainInput) -> ScoreAndTrainResult:
        """Record the score, then train on it with the rules engine: two steps that always run
        one after the other, as one local activity (one workflow activation and one thread
        instead of two). Each keeps its own transaction, so a training that fails leaves the
        score recorded: the store being away is retried (the score's write is idempotent),
        anything else ends the training, whose error the lineage shows in ``state``."""
        verdict = self.record_score(inp.record)
        try:
            applied = self.trainer.train(inp.trainer)
        except Exception as error:
            if is_transient(error):
                raise
            reason = redact(" ".join(f"{type(error).__name__}: {error}".split()))
            return ScoreAndTrainResult(
                verdict=verdict, training_error=reason[:TRAINING_ERROR_CHARS]
            )
        return ScoreAndTrainResult(verdict=verdict, applied=applied)

    def _share(self, inp: RecordScoreInput, judged: JudgedEvolution) -> None:
        """Publish the outcome to the session's shared findings, where every lineage reads
        what the others learned (``view_others``). Once per evolution, even if retried."""
        shared = WorkerStoreProxy(
            DatabaseSharedStore(
                self.store.engine, f"session:{inp.session_id}", self.store.read_engine
            ),
            inp.lineage_id,
        )
        verdict, tag = judged.verdict, f"evolution:{judged.evolution_id}"
        if shared.shared.query(f"tag={tag}"):
            return
        for observation in judged.insights:
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
