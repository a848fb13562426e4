"""Several raters on one lineage (a panel): who is expected, how many may go on, and what the
step acts on when they have spoken. Pure and deterministic: the workflow decides when a cycle
goes on with it, and the cycle step what the raters agree on.

The cycle's score is the median of the raters' latest scores. A wish goes into the plan when a
majority of the raters who scored asked for it and none refused it (``remove:``/``less:`` of
what others ask to add or have more of, or the reverse) or asked for its opposite
(``longer`` against ``shorter``). A wish in dispute changes nothing and is said back to every
rater with who said what. Disagreement is shown, never averaged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel, Field

from domain import want_labels
from domain import wants as want_grammar
from domain.trainer import FeedbackAspect

# an action that moves a family up, or down (a refusal of the other way)
FOR = ("add", "more", "keep")
AGAINST = ("remove", "less")
# The raters of an output agree on its score when their scores lie within this many points of
# each other (0-10 scale; max - min). Training data pairs only such outputs
# (docs/training-data.md): a score the raters are further apart on says little about which of
# two answers is better.
AGREEMENT_SPREAD = 2.0


class Panel(BaseModel):
    """A lineage's raters, from its options: the names expected (empty: ``size`` raters of
    any name), the fewest scores the cycle may go on with, and the window in seconds (None:
    the cycle waits for every rater)."""

    names: list[str] = Field(default_factory=list)
    size: int
    quorum: int
    window_seconds: float | None = None


class RaterScore(BaseModel):
    """One rater's score on the output awaiting scores: appended as it arrives; a later one
    from the same rater supersedes it while the cycle waits."""

    rater: str
    score: float
    comment: str | None = None
    wants: list[str] | None = None  # the reading the rater confirmed (None: read the comment)
    changes: list[str] | None = None  # the plan keys the rater confirmed with it
    evaluation_id: str  # this score's own id (the output's and what was sent)
    supersedes: str | None = None  # the rater's earlier score on the same output


class Said(BaseModel):
    rater: str
    want: str


class Dispute(BaseModel):
    """Wishes the raters disagree on: what each said. The step acts on none of them."""

    families: list[str]  # the families at stake (a family, or it and its opposite)
    said: list[Said]
    # the (family, up?) stances it holds, while the agreement is worked out (not recorded)
    stances: list[tuple[str, bool]] = Field(default_factory=list, exclude=True)

    def line(self) -> str:
        """In the raters' words: "disagreement on longer, more depth / shorter (ana: shorter;
        cy: longer, more depth)"."""
        by = "; ".join(f"{s.rater}: {_words(s.want)}" for s in self.said)
        at_stake = " / ".join(_words(f) for f in self.families)
        return f"disagreement on {at_stake} ({by}): nothing changed for it"

    def against(self) -> str:
        """Each side with who took it: "shorter (ana, bo) against longer, more depth (cy)"; a
        side worded two ways, each way: "shorter (ana) and shorter: about half (bo)"."""
        sides: dict[tuple[str, bool], dict[str, list[str]]] = {}
        for s in self.said:
            side = sides.setdefault(_stance(s.want), {})
            side.setdefault(_words(s.want), []).append(s.rater)
        return " against ".join(
            " and ".join(f"{words} ({', '.join(who)})" for words, who in side.items())
            for side in sides.values()
        )


class RaterReading(BaseModel):
    rater: str
    score: float
    wants: list[str]


class RaterVerdict(BaseModel):
    """One rater's verdict on one family the last change pursued, from their own score and
    reading (the change is rolled back only when most of the raters who judged it refute it)."""

    rater: str
    family: str
    verdict: str  # validated / not_far_enough / refuted / untested
    reason: str


class Agreement(BaseModel):
    """What the raters who spoke agree on: the cycle's score and the wants the step acts on;
    the disputes; and the wishes too few asked for."""

    score: float
    agreed: list[str] = Field(default_factory=list)
    disputes: list[Dispute] = Field(default_factory=list)
    minority: list[Said] = Field(default_factory=list)
    readings: list[RaterReading] = Field(default_factory=list)
    # each rater's verdict on the change the scored output came from (none: no change pending)
    verdicts: list[RaterVerdict] = Field(default_factory=list)

    @property
    def spread(self) -> float:
        """How far apart the raters' scores are: the highest less the lowest."""
        scores = [r.score for r in self.readings]
        return max(scores) - min(scores) if scores else 0.0

    @property
    def scores_agree(self) -> bool:
        return self.spread <= AGREEMENT_SPREAD

    def not_agreed(self) -> list[str]:
        """What was asked and not agreed on, in the chips' words, for the say-back: "shorter
        (ana, bo) against longer, more depth (cy)", "table asked by 1 of 3 (cy), no
        majority". Empty when every wish asked for was agreed on."""
        out = [d.against() for d in self.disputes]
        by: dict[tuple[str, bool], list[Said]] = {}
        for s in self.minority:
            by.setdefault(_stance(s.want), []).append(s)
        raters = len(self.readings)
        for said in by.values():
            who = list(dict.fromkeys(s.rater for s in said))  # each rater once
            if _keeps(said[0].want):
                out.append(_kept(", ".join(who), said[0].want, several=len(who) > 1))
                continue
            out.append(
                f"{_words(_most_said(said))} asked by {len(who)} of {raters} "
                f"({', '.join(who)}), no majority"
            )
        return out

    def lines(self) -> list[str]:
        out = [d.line() for d in self.disputes]
        raters = len(self.readings)
        out += [
            _kept(s.rater, s.want)
            if _keeps(s.want)
            else f"{s.rater} asked for {_words(s.want)}: not a majority of the {raters} raters, "
            "not acted on"
            for s in self.minority
        ]
        return out


def _keeps(want: str) -> bool:
    return want_grammar.parse(want).action == "keep"


def _kept(who: str, want: str, several: bool = False) -> str:
    """A keep no one opposed, as it is: nothing changes what it keeps, whoever else spoke
    ("pilar keeps answer first: it stays"), not a wish "not acted on"."""
    family = _kind(want_grammar.parse(want))
    return f"{who} {'keep' if several else 'keeps'} {_words(family)}: it stays"


def _words(want: str) -> str:
    """A want (or a family) as the chips say it ("keep:table" is "keep table")."""
    try:
        return want_labels.label(want)
    except ValueError:
        return want


def latest(scores: Sequence[RaterScore]) -> list[RaterScore]:
    """Each rater's latest score, in the order the raters first scored."""
    by: dict[str, RaterScore] = {}
    for s in scores:
        by[s.rater.casefold()] = s  # a later score replaces, the rater keeps their place
    return list(by.values())


def scored_by(scores: Sequence[RaterScore]) -> list[str]:
    return [s.rater for s in latest(scores)]


def still_to_score(panel: Panel, scores: Sequence[RaterScore]) -> list[str]:
    """The named raters who have not scored (none for a panel of any names)."""
    done = {r.casefold() for r in scored_by(scores)}
    return [n for n in panel.names if n.casefold() not in done]


def everyone_scored(panel: Panel, scores: Sequence[RaterScore]) -> bool:
    if panel.names:
        return not still_to_score(panel, scores)
    return len(latest(scores)) >= panel.size


def quorum_met(panel: Panel, scores: Sequence[RaterScore]) -> bool:
    return len(latest(scores)) >= panel.quorum


def progress(panel: Panel, scores: Sequence[RaterScore], window_ended: bool = False) -> str:
    """ "2 of 3 scored (bo, cy still to score)", and, once the window has ended short of the
    quorum, that the cycle keeps waiting."""
    count = len(latest(scores))
    line = f"{count} of {panel.size} scored"
    missing = still_to_score(panel, scores)
    if missing:
        line += f" ({', '.join(missing)} still to score)"
    if window_ended and count < panel.quorum:
        line += (
            f"; the score window has ended short of the quorum of {panel.quorum}: "
            "the cycle keeps waiting for more scores"
        )
    return line


def expected_rater(panel: Panel, rater: str | None) -> str | None:
    """Why a score cannot count for this panel: no rater's name, or not one of the names."""
    if rater is None or not rater.strip():
        return "rater: this lineage has several raters; name yourself (rater)"
    if panel.names and rater.casefold() not in {n.casefold() for n in panel.names}:
        return f"rater: {rater} is not one of this lineage's raters ({', '.join(panel.names)})"
    return None


OTHERS_SHOWN_CHARS = 80  # a comment sent without a confirmed reading, as the preview quotes it


def others_said(scores: Sequence[RaterScore], rater: str | None) -> list[str]:
    """What the raters other than ``rater`` (everyone, unnamed) have asked so far on the output
    awaiting scores, each once, as the preview shows it: "ana 3: shorter, table", or the
    comment their reading will come from ("bo 5: 'too long'")."""
    me = (rater or "").casefold()
    lines = []
    for s in latest(scores):
        if s.rater.casefold() == me:
            continue
        if s.wants is not None:
            asked = ", ".join(_words(w) for w in s.wants) or "no change"
        elif s.comment:
            said = " ".join(s.comment.split())
            if len(said) > OTHERS_SHOWN_CHARS:
                said = said[: OTHERS_SHOWN_CHARS - 1].rstrip() + "…"
            asked = repr(said)
        else:
            asked = "a score alone"
        lines.append(f"{s.rater} {s.score:g}: {asked}")
    return lines


def median(scores: Sequence[RaterScore]) -> float:
    return float(statistics.median(s.score for s in latest(scores)))


def _kind(aspect: FeedbackAspect) -> str:
    """What a want is a stance on: its family, but a phrase to avoid, a language or a tool is
    its own (ana's avoid 'this analysis examines' is not bo's avoid 'merits …')."""
    family, detail = aspect.want or aspect.aspect, aspect.detail
    if family == "banned" and detail:
        return f'avoid:"{detail}"'
    if family == "language" and detail:
        return f"language:{detail.lower()}"
    return detail if detail and detail.startswith(f"{family}:") else family


def _stance(want: str) -> tuple[str, bool]:
    """A want's family, and whether it moves it up (not a refusal): raters who share a
    stance are on one side, however they worded it."""
    aspect = want_grammar.parse(want)
    return _kind(aspect), aspect.action not in AGAINST


def agree(readings: Sequence[RaterReading]) -> Agreement:
    """What the raters (each once, with the wants they confirmed or their comment was read
    as) agree on."""
    speakers = len(readings)
    # (family, up?) -> [(rater, want)], in the order raters spoke
    stances: dict[tuple[str, bool], list[Said]] = {}
    for reading in readings:
        for want in reading.wants:
            stances.setdefault(_stance(want), []).append(Said(rater=reading.rater, want=want))
    agreed: list[str] = []
    disputes: list[Dispute] = []
    minority: list[Said] = []
    disputed: set[tuple[str, bool]] = set()
    for (family, up), said in stances.items():
        against = [(family, not up)]
        if up:
            against += [(o, True) for o in sorted(want_grammar.opposites(family))]
        objections = [k for k in against if k in stances]
        if objections:
            keys = [(family, up), *objections]
            # a wish clashing with one already in dispute (table against the prose that is
            # against bullets) joins that dispute: every wish not acted on is said back
            joined = next((d for d in disputes if any(k in d.stances for k in keys)), None)
            if joined is None:
                joined = Dispute(families=[], said=[])
                disputes.append(joined)
            for key in keys:
                if key not in joined.stances:
                    joined.stances.append(key)
                    joined.said += stances[key]
            joined.families = sorted({k[0] for k in joined.stances})
            disputed.update(keys)
            continue
        raters = {s.rater.casefold() for s in said}
        if 2 * len(raters) > speakers:
            agreed.append(_agreed_want(said))
        else:
            minority.extend(said)
    return Agreement(
        score=float(statistics.median(r.score for r in readings)) if readings else 0.0,
        agreed=agreed,
        disputes=disputes,
        minority=minority,
        readings=list(readings),
    )


def _agreed_want(said: list[Said]) -> str:
    """The want a family's majority is acted on as: the one most raters worded alike, but with
    an amount when any of them gave one ("shorter" and "shorter:half" is "shorter:half"), of
    the kind most of them gave (two shares beat one word limit: they are not comparable
    unmeasured; the first given among equals), the mildest of that kind (nearest to no
    change)."""
    measured = [s for s in said if want_grammar.parse(s.want).amount is not None]
    if not measured:
        return _most_said(said)
    kinds = [want_grammar.parse(s.want).amount.kind for s in measured]  # type: ignore[union-attr]
    kind = max(kinds, key=kinds.count)  # max keeps the first of equal counts
    alike = [s for s, k in zip(measured, kinds, strict=True) if k == kind]
    return min(alike, key=lambda s: _strength(want_grammar.parse(s.want))).want


def _strength(aspect: FeedbackAspect) -> float:
    """How far an amount moves from the output as it is, for ordering alike amounts: a larger
    share or word limit of ``shorter`` (or of a ``less``) moves less, a smaller count to add
    moves less."""
    amount = aspect.amount
    assert amount is not None
    shrinks = aspect.want == "shorter" or aspect.action in AGAINST
    return -amount.value if shrinks else amount.value


def _most_said(said: list[Said]) -> str:
    """The want most raters worded alike (the first said among equals)."""
    counts: dict[str, int] = {}
    for s in said:
        counts[s.want] = counts.get(s.want, 0) + 1
    return max(counts, key=lambda w: counts[w])
