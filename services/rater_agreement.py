"""Inter-rater agreement over a session (`training-camp-data report`): Krippendorff's alpha
(interval) on the scores of the outputs two or more raters scored, and the wishes the raters
disputed, with who said what. Read from the log: each rater's latest score on each output
(``rater.scored``; a later one supersedes theirs) and what the raters agreed on as each cycle
went on (``raters.agreed``)."""

from __future__ import annotations

import math

from pydantic import BaseModel, Field

from domain.events import RatersAgreed, RaterScored
from store import Store

NO_PAIRS = (
    "no output of this session was scored by two or more raters: inter-rater agreement "
    "cannot be measured"
)
NO_SPREAD = (
    "every score of the outputs two or more raters scored is the same: the raters agree, and "
    "alpha is undefined (it measures disagreement against the scores' variation)"
)


class DisputeSaid(BaseModel):
    """A wish the raters of one output disputed, and what each said."""

    lineage: str  # its label
    cycle: int
    families: list[str]
    said: list[tuple[str, str]]  # (rater, want)

    def line(self) -> str:
        by = "; ".join(f"{rater}: {want}" for rater, want in self.said)
        return f"{self.lineage} cycle {self.cycle}: {' / '.join(self.families)} ({by})"


class RaterAgreement(BaseModel):
    """What ``report`` says of the raters of one session."""

    raters: list[str] = Field(default_factory=list)  # everyone who scored, first seen first
    outputs: int = 0  # outputs two or more raters scored (the units alpha is computed over)
    scores: int = 0  # their raters' latest scores
    alpha: float | None = None  # Krippendorff's alpha, interval; None: not measurable
    why_not: str | None = None  # why alpha is not given
    disputes: list[DisputeSaid] = Field(default_factory=list)

    def lines(self) -> list[str]:
        if self.alpha is None:
            head = f"Inter-rater agreement: {self.why_not}."
        else:
            head = (
                f"Inter-rater agreement: Krippendorff's alpha (interval) {self.alpha:.2f} over "
                f"{self.outputs} output{'s' if self.outputs != 1 else ''} scored by two or more "
                f"raters ({self.scores} scores; raters: {', '.join(self.raters)})."
            )
        if not self.disputes:
            return [head, "Wishes in dispute: none."]
        return [head, "Wishes in dispute:", *(f"  {d.line()}" for d in self.disputes)]


def session_agreement(store: Store, session_id: str) -> RaterAgreement:
    q = store.queries
    # (lineage, rollout) -> rater (folded) -> latest score; names as first written
    units: dict[tuple[str, str], dict[str, float]] = {}
    names: dict[str, str] = {}
    disputes: list[DisputeSaid] = []
    for lineage in q.session_lineages(session_id):
        for scored in q.lineage_events(lineage.id, RaterScored):
            rater = scored.rater.casefold()
            names.setdefault(rater, scored.rater)
            units.setdefault((lineage.id, scored.rollout_id), {})[rater] = scored.score
        for agreed in q.lineage_events(lineage.id, RatersAgreed):
            disputes += [
                DisputeSaid(
                    lineage=lineage.label,
                    cycle=agreed.cycle,
                    families=d.families,
                    said=[(s.rater, s.want) for s in d.said],
                )
                for d in agreed.disputes
            ]
    shared = [scores for scores in units.values() if len(scores) >= 2]
    raters = sorted({r for scores in shared for r in scores}, key=list(names).index)
    found = RaterAgreement(
        raters=[names[r] for r in raters],
        outputs=len(shared),
        scores=sum(len(scores) for scores in shared),
        disputes=disputes,
    )
    if not shared:
        return found.model_copy(update={"why_not": NO_PAIRS})
    alpha = _alpha([[scores.get(r, math.nan) for scores in shared] for r in raters])
    if alpha is None:
        return found.model_copy(update={"why_not": NO_SPREAD})
    return found.model_copy(update={"alpha": alpha})


def _alpha(reliability: list[list[float]]) -> float | None:
    """Krippendorff's alpha (interval) of a table of raters by outputs (NaN: not scored), by the
    maintained ``krippendorff`` package; None when every score is the same."""
    import krippendorff  # numpy: loaded when a report asks

    try:
        return float(
            krippendorff.alpha(reliability_data=reliability, level_of_measurement="interval")
        )
    except ValueError:  # "more than one value in the domain": nothing varies
        return None
