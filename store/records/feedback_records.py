"""Records of human feedback: scores (with the verdict they carry and, once every lineage has
scored a cycle, the comparison), rejections, directives and locks."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, Select, bindparam, func, select

from domain.cycle import comparison_id
from domain.events import (
    ArtifactsCompared,
    ArtifactScored,
    ComparedArtifact,
    DirectiveAdded,
    EvolutionJudged,
    FeedbackRejected,
    InsightDiscovered,
    InsightTested,
    LineageLocked,
    LineagePromoted,
    LineageUnlocked,
    LoggedAspectVerdict,
    PanelDispute,
    PanelSaid,
    PanelVerdict,
    PanelVoice,
    PlanConfirmed,
    RatersAgreed,
    RaterScored,
    RatersJudged,
)
from domain.lineage import (
    RecordDirectiveInput,
    RecordLockInput,
    RecordPromotionInput,
    RecordRaterScoreInput,
    RecordRejectionInput,
)
from domain.panel import Agreement
from domain.trainer import (
    EvolutionOutcome,
    InsightObservation,
)
from store.backends.dialect import backend_of
from store.eventstore.event_log import EventRefs, NewEvent
from store.eventstore.event_writer import EventWriter, now_ms
from store.tables import EvaluationRow, LineageRow, SessionRow

HIGH_SCORE = 8
LOW_SCORE = 3
# tags of a cycle's evaluation scored by several raters, and of one their scores disagree on
SEVERAL_RATERS = "several_raters"
RATERS_DISAGREE = "raters_disagree"


class FeedbackRecords(EventWriter):
    """Scores, rejections, directives, locks."""

    def record_score(
        self,
        *,
        session_id: str,
        lineage_id: str,
        evaluation_id: str,
        artifact_id: str,
        rollout_id: str,
        cycle: int,
        agent_version: int,
        score: float,
        comment: str | None,
        rater: str | None,
        outcome: tuple[str, EvolutionOutcome] | None,
        insights: Sequence[InsightObservation] = (),
        wants: list[str] | None = None,
        confirmed: list[str] | None = None,
        agreement: Agreement | None = None,
    ) -> None:
        """The score, the verdict it gave, what it taught the session, and the plan its rater
        confirmed (``confirmed``: the keys of the changes, sent with ``wants``), if one was."""
        ts = now_ms()
        refs: EventRefs = {"session_id": session_id, "lineage_id": lineage_id, "timestamp": ts}
        tags = (
            ["high_score"] if score >= HIGH_SCORE else ["low_score"] if score <= LOW_SCORE else []
        )
        if agreement is not None:
            # several raters; apart by more than AGREEMENT_SPREAD, their output pairs with none
            # (store/exports/materializer.py reads the tag in SQL)
            tags.append(SEVERAL_RATERS)
            if not agreement.scores_agree:
                tags.append(RATERS_DISAGREE)
        events = [
            NewEvent.of(
                ArtifactScored(
                    evaluation_id=evaluation_id,
                    rollout_id=rollout_id,
                    cycle=cycle,
                    agent_version=agent_version,
                    score=score,
                    comment=comment,
                    rater=rater,
                ),
                evaluation_id,
                artifact_id=artifact_id,
                tags=tags,
                **refs,
            )
        ]
        if confirmed is not None:
            plan = PlanConfirmed(
                evaluation_id=evaluation_id,
                cycle=cycle,
                agent_version=agent_version,
                wants=wants,
                changes=confirmed,
            )
            events.append(NewEvent.of(plan, evaluation_id, artifact_id=artifact_id, **refs))
        if agreement is not None:
            agreed = _agreed(evaluation_id, cycle, agent_version, agreement)
            events.append(NewEvent.of(agreed, evaluation_id, artifact_id=artifact_id, **refs))
        if outcome is not None:
            evolution_id, result = outcome
            events.append(NewEvent.of(_judged(evolution_id, result), evolution_id, **refs))
            if agreement is not None and agreement.verdicts:
                judged = RatersJudged(
                    evolution_id=evolution_id,
                    evaluation_id=evaluation_id,
                    cycle=cycle,
                    verdicts=[
                        PanelVerdict(
                            rater=v.rater, family=v.family, verdict=v.verdict, reason=v.reason
                        )
                        for v in agreement.verdicts
                    ],
                )
                events.append(NewEvent.of(judged, evaluation_id, artifact_id=artifact_id, **refs))
        for seen in insights:
            events.append(
                NewEvent.of(
                    InsightDiscovered(
                        insight_id=seen.insight_id,
                        pattern=seen.pattern,
                        pattern_type=seen.pattern_type,
                        contexts=seen.contexts,
                    ),
                    seen.insight_id,
                    **refs,
                )
            )
            events.append(
                NewEvent.of(
                    InsightTested(
                        insight_id=seen.insight_id,
                        evolution_id=seen.evolution_id,
                        success=seen.success,
                        score_delta=seen.score_delta,
                    ),
                    f"{seen.insight_id}/{seen.evolution_id}",
                    **refs,
                )
            )
        self._write(events, follow_up=lambda conn: _comparison(conn, session_id, cycle, ts))

    def record_rater_score(self, inp: RecordRaterScoreInput) -> None:
        """One rater's score on an output awaiting several, as it arrives (appended: a later
        one from the same rater names the one it supersedes)."""
        s = inp.score
        scored = RaterScored(
            evaluation_id=s.evaluation_id,
            rollout_id=inp.rollout_id,
            cycle=inp.cycle,
            agent_version=inp.agent_version,
            rater=s.rater,
            score=s.score,
            comment=s.comment,
            wants=s.wants,
            changes=s.changes,
            supersedes=s.supersedes,
        )
        self._write(
            [
                NewEvent.of(
                    scored,
                    s.evaluation_id,
                    artifact_id=inp.artifact_id,
                    session_id=inp.session_id,
                    lineage_id=inp.lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )

    def record_judgement(
        self,
        *,
        session_id: str,
        lineage_id: str,
        key: str,
        evolution_id: str,
        outcome: EvolutionOutcome,
    ) -> None:
        """A verdict on an evolution given again, under its own ``key``: a corrected reading
        of the score that judged it supersedes the first verdict (the later event wins)."""
        self._write(
            [
                NewEvent.of(
                    _judged(evolution_id, outcome),
                    key,
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )

    def record_feedback(
        self, inp: RecordRejectionInput | RecordDirectiveInput | RecordLockInput
    ) -> None:
        """A rejected signal, a directive or a lock, as the workflow's recording step sends it."""
        match inp:
            case RecordRejectionInput():
                self.record_rejection(**inp.model_dump())
            case RecordDirectiveInput():
                self.record_directive(**inp.model_dump())
            case RecordLockInput():
                self.record_lock(**inp.model_dump())

    def record_rejection(
        self,
        *,
        session_id: str,
        lineage_id: str,
        rejection_id: str,
        cycle: int,
        kind: str,
        payload_preview: str,
        reason: str,
    ) -> None:
        self._write(
            [
                NewEvent.of(
                    FeedbackRejected(
                        rejection_id=rejection_id,
                        cycle=cycle,
                        kind=kind,
                        payload_preview=payload_preview,
                        reason=reason,
                    ),
                    rejection_id,
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                    tags=["rejected"],
                )
            ]
        )

    def record_directive(
        self,
        *,
        session_id: str,
        lineage_id: str,
        directive_id: str,
        cycle: int,
        kind: str,
        content: str,
    ) -> None:
        self._write(
            [
                NewEvent.of(
                    DirectiveAdded(
                        directive_id=directive_id, kind=kind, content=content, cycle=cycle
                    ),
                    directive_id,
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                )
            ]
        )

    def record_lock(
        self,
        *,
        session_id: str,
        lineage_id: str,
        event_key: str,
        cycle: int,
        locked: bool,
        reason: str | None,
    ) -> None:
        """A lock names the session's other lineages with their latest scores as it stands,
        what a preference for the locked lineage's output is drawn against."""
        competitor_scores = self._competitor_scores(session_id, lineage_id) if locked else {}
        event = (
            LineageLocked(
                reason=reason,
                cycle=cycle,
                competing_lineage_ids=sorted(competitor_scores),
                competitor_scores=competitor_scores,
            )
            if locked
            else LineageUnlocked(reason=reason, cycle=cycle)
        )
        self._write(
            [
                NewEvent.of(
                    event,
                    event_key,
                    session_id=session_id,
                    lineage_id=lineage_id,
                    timestamp=now_ms(),
                    tags=["preference_signal"] if locked else [],
                )
            ]
        )

    def record_promotion(self, inp: RecordPromotionInput) -> dict[str, float | None]:
        """The session's champion: the lineage at a version, preferred to every other lineage
        of the session (their latest scores as it stands), and locked (``lineage.locked`` with
        the same competitors) unless it was already. Returns the competitors' scores."""
        scores = self._competitor_scores(inp.session_id, inp.lineage_id)
        refs: EventRefs = {
            "session_id": inp.session_id,
            "lineage_id": inp.lineage_id,
            "timestamp": now_ms(),
        }
        competing = sorted(scores)
        events = []
        if inp.lock:
            events.append(
                NewEvent.of(
                    LineageLocked(
                        reason=inp.reason,
                        cycle=inp.cycle,
                        competing_lineage_ids=competing,
                        competitor_scores=scores,
                    ),
                    f"{inp.event_key}:lock",
                    tags=["preference_signal"],
                    **refs,
                )
            )
        events.append(
            NewEvent.of(
                LineagePromoted(
                    version=inp.version,
                    cycle=inp.cycle,
                    reason=inp.reason,
                    rater=inp.rater,
                    competing_lineage_ids=competing,
                    competitor_scores=scores,
                ),
                inp.event_key,
                tags=["preference_signal", "champion"],
                **refs,
            )
        )
        self._write(events)
        return scores

    def _competitor_scores(self, session_id: str, lineage_id: str) -> dict[str, float | None]:
        """The session's other lineages, each with its latest score (None: none yet)."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                _COMPETITOR_SCORES, {"session_id": session_id, "lineage_id": lineage_id}
            ).all()
        return {lineage: score for lineage, score in rows}


def _comparison_statements() -> tuple[Select, Select, Select]:
    sessions, lineages = SessionRow.__table__, LineageRow.__table__  # type: ignore[attr-defined]
    evaluations = EvaluationRow.__table__  # type: ignore[attr-defined]
    session, cycle = bindparam("session_id"), bindparam("cycle")
    of_cycle = (evaluations.c.session_id == session) & (evaluations.c.cycle == cycle)
    lock = select(sessions.c.id).where(sessions.c.id == session).with_for_update()
    counts = select(
        select(func.count()).where(lineages.c.session_id == session).scalar_subquery(),
        select(func.count(evaluations.c.lineage_id.distinct())).where(of_cycle).scalar_subquery(),
    )
    scores = (
        select(evaluations.c.lineage_id, evaluations.c.artifact_id, evaluations.c.score)
        .where(of_cycle)
        .order_by(evaluations.c.created_at)
    )
    return lock, counts, scores


def _competitor_scores() -> Select:
    lineages = LineageRow.__table__  # type: ignore[attr-defined]
    evaluations = EvaluationRow.__table__  # type: ignore[attr-defined]
    latest = (
        select(evaluations.c.score)
        .where(evaluations.c.lineage_id == lineages.c.id)
        .order_by(evaluations.c.created_at.desc())
        .limit(1)
        .scalar_subquery()
    )
    return select(lineages.c.id, latest).where(
        (lineages.c.session_id == bindparam("session_id"))
        & (lineages.c.id != bindparam("lineage_id"))
    )


_COMPETITOR_SCORES = _competitor_scores()
# Built once: a score's transaction runs them while holding the write lock.
_LOCK_SESSION, _MEMBERS_AND_SCORED, _CYCLE_SCORES = _comparison_statements()


def _comparison(conn: Connection, session_id: str, cycle: int, ts: int) -> list[NewEvent]:
    """``ArtifactsCompared`` once every lineage of the session has scored this cycle's output.
    Every score asks, in one row, whether all have; only the last one reads the scores: each
    row read is a step out of the GIL and back, inside the write transaction."""
    params = {"session_id": session_id, "cycle": cycle}
    if not backend_of(conn).serialises_writes:
        conn.execute(_LOCK_SESSION, params)  # serialise concurrent scorers of one session
    members, scored = conn.execute(_MEMBERS_AND_SCORED, params).one()
    if members < 2 or scored != members:
        return []
    rows = conn.execute(_CYCLE_SCORES, params).all()
    latest = {lineage: (artifact, score) for lineage, artifact, score in rows}
    ranked = sorted(latest.items(), key=lambda item: (-item[1][1], item[0]))
    return [
        NewEvent.of(
            ArtifactsCompared(
                cycle=cycle,
                artifacts=[
                    ComparedArtifact(id=artifact, lineage_id=lineage, score=score)
                    for lineage, (artifact, score) in sorted(latest.items())
                ],
                ranking=[artifact for _, (artifact, _) in ranked],
            ),
            comparison_id(session_id, cycle),
            session_id=session_id,
            timestamp=ts,
            tags=["comparison"],
        )
    ]


def _judged(evolution_id: str, outcome: EvolutionOutcome) -> EvolutionJudged:
    """The verdict on an evolution as the log keeps it."""
    return EvolutionJudged(
        evolution_id=evolution_id,
        next_score=outcome.next_score,
        score_delta=outcome.score_delta,
        validated=outcome.hypothesis_validated,
        reason=outcome.reason,
        aspects=[LoggedAspectVerdict.of(a) for a in outcome.aspects],
    )


def _agreed(evaluation_id: str, cycle: int, version: int, agreement: Agreement) -> RatersAgreed:
    return RatersAgreed(
        evaluation_id=evaluation_id,
        cycle=cycle,
        agent_version=version,
        score=agreement.score,
        voices=[
            PanelVoice(rater=r.rater, score=r.score, wants=r.wants) for r in agreement.readings
        ],
        agreed=agreement.agreed,
        disputes=[
            PanelDispute(
                families=d.families, said=[PanelSaid(rater=x.rater, want=x.want) for x in d.said]
            )
            for d in agreement.disputes
        ],
        minority=[PanelSaid(rater=x.rater, want=x.want) for x in agreement.minority],
    )
