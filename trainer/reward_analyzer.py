"""Reward Analyzer: score + comment → sentiment, aspects (with what the reviewer wants), trend.

Criticism is read at any score ("Good, but warmer please" at 7 still asks for warmth), and
praise is recorded as a positive aspect so the planner keeps what the reviewer liked.
"""

from __future__ import annotations

import re
from typing import Literal

from domain import wants
from domain.trainer import FeedbackAspect, ScoreAnalysis, UnsureClause
from trainer.checks import banned_phrases, quoted_sentences
from trainer.reading import reader as feedback_reader
from trainer.reading.memory import ReadingMemory
from trainer.reading.wish import Wish

TREND_EPSILON = 0.5
KEEP_SCORE = 8  # from this score, a comment that asks for nothing changes nothing
IRONY_AT_MOST = 4  # praise under a score this low may be irony
_PREFERS = re.compile(r"\b(?:reads?|works?|looks?|would be|is|are)\s+(?:much\s+|far\s+)?better\b")
QUOTE_CHARS = 200
Trend = Literal["improving", "stable", "declining"]


def analyze(
    score: float,
    comment: str | None,
    previous_scores: list[float],
    wanted: list[str] | None = None,
    memory: ReadingMemory | None = None,
) -> ScoreAnalysis:
    """The analysis of a score and its comment; ``wanted`` (structured wishes sent with the
    score, ``domain.wants``) is taken as given instead of reading the comment. Else a comment
    close to one a rater corrected (``memory``) is read as the correction said, each aspect
    citing the corrected comment; else the cue tables read it."""
    comment = (comment or "").strip()
    if wanted is not None:
        return ScoreAnalysis(
            score=score,
            comment=comment or None,
            sentiment=_sentiment(score),
            aspects=_as_given(wanted, score, comment, memory),
            trend=trend_of(score, previous_scores)[0],
            delta_from_previous=trend_of(score, previous_scores)[1],
        )
    recalled = memory.recall(comment) if memory is not None and comment else None
    if recalled is not None:
        cited = recalled.cited()[:QUOTE_CHARS]
        return ScoreAnalysis(
            score=score,
            comment=comment,
            sentiment=_sentiment(score),
            # an empty correction is a reading too: the comment asks for nothing
            aspects=[wants.parse(w).model_copy(update={"quote": cited}) for w in recalled.wants],
            trend=trend_of(score, previous_scores)[0],
            delta_from_previous=trend_of(score, previous_scores)[1],
        )
    sentiment = _sentiment(score)
    reading = feedback_reader.read(comment) if comment else feedback_reader.Reading()
    if (
        score >= KEEP_SCORE
        and comment
        and (not feedback_reader.asks(comment) or feedback_reader.keeps_whole(comment))
    ):
        # a high score and no request: the qualities named are what the reviewer liked ("not a
        # word too many", "I expected jargon and there's none"), never wishes to change them
        reading.praised += [(w.aspect, w.quote) for w in reading.wishes if w.action == "add"]
        reading.praised += reading.criticised
        reading.wishes = [w for w in reading.wishes if w.action != "add"]
        reading.criticised = []
    elif score >= KEEP_SCORE and comment and reading.language is None:
        # (a comment in another language is read by that language's own frames)
        _remarks(score, comment, reading)
    if score <= IRONY_AT_MOST and comment:
        _ironic(score, comment, reading)
    found: list[FeedbackAspect] = []
    named: set[str] = set()
    for wish in reading.wishes:
        found.append(_aspect_of(wish))
        named.add(wish.aspect)
    for kept in reading.kept:
        # what the reviewer approves of, by family: the verdict on a change reads it
        found.append(
            FeedbackAspect(
                aspect=kept.aspect,
                sentiment="positive",
                quote=kept.quote[:QUOTE_CHARS],
                confidence=kept.confidence,
                want=kept.family,
                action="keep",
                amount=kept.amount,
            )
        )
        named.add(kept.aspect)
    # criticism without a wish, then praise: one aspect each, criticism first
    for said, remarks in (("negative", reading.criticised), ("positive", reading.praised)):
        for aspect, quote in remarks:
            if aspect not in named:
                found.append(
                    FeedbackAspect(
                        aspect=aspect, sentiment=said, quote=quote[:QUOTE_CHARS], confidence=0.6
                    )
                )
                named.add(aspect)
    if score < KEEP_SCORE:
        found += _quoted_as_the_problem(comment)
    found += _banned_outright(comment, reading)
    trend, delta = trend_of(score, previous_scores)
    return ScoreAnalysis(
        score=score,
        comment=comment or None,
        sentiment=sentiment,
        aspects=found,
        trend=trend,
        delta_from_previous=delta,
        adversarial=bool(reading.injection),
        refused=[r[:QUOTE_CHARS] for r in reading.refused],
        comment_language=reading.language,
        unsure=[
            UnsureClause(
                quote=u.quote[:QUOTE_CHARS], why=u.why[:QUOTE_CHARS], proposed=list(u.proposed)
            )
            for u in reading.unsure[:10]
        ],
    )


def _aspect_of(wish: Wish) -> FeedbackAspect:
    return FeedbackAspect(
        aspect=wish.aspect,
        sentiment="negative",
        quote=wish.quote[:QUOTE_CHARS],
        confidence=wish.confidence,
        want=wish.family,
        detail=wish.detail,
        action=wish.action,
        amount=wish.amount,
    )


def _quoted_as_the_problem(comment: str) -> list[FeedbackAspect]:
    """A sentence of the output the rater quotes under a low score ('"Leverage synergies to
    optimise throughput" is jargon') is offered as a phrase to avoid (``avoid:"…"``), checked
    on every later output; a phrase the comment bans outright ("no 'worth noting'") is checked
    already. (Here, not in the reader: a quotation is no cue of a family.)"""
    banned = {p.lower() for p in banned_phrases(comment)}
    return [
        FeedbackAspect(
            aspect="overall",
            sentiment="negative",
            quote=sentence[:QUOTE_CHARS],
            confidence=0.8,
            want="banned",
            detail=sentence[: wants.MAX_AVOID_CHARS],  # as written: a check matches any case
            action="add",
        )
        for sentence in quoted_sentences(comment)
        if sentence.lower() not in banned
    ]


def _banned_outright(comment: str, reading: feedback_reader.Reading) -> list[FeedbackAspect]:
    """A phrase the comment bans outright ("stop saying 'best-in-class'") at any score: a wish
    the reading says back and every later output is checked for, as the phrase was written;
    the sentence that said it is understood (no "not understood" beside it)."""
    banned = banned_phrases(comment)
    reading.unsure = [u for u in reading.unsure if not any(p in u.quote for p in banned)]
    return [
        FeedbackAspect(
            aspect="overall",
            sentiment="negative",
            quote=f"no {phrase!r}"[:QUOTE_CHARS],
            confidence=0.9,
            want="banned",
            detail=phrase[: wants.MAX_AVOID_CHARS],
            action="add",
        )
        for phrase in banned
    ]


def _as_given(
    wanted: list[str], score: float, comment: str, memory: ReadingMemory | None
) -> list[FeedbackAspect]:
    """The wants taken as given, each quoting the rater's words where the comment's own
    reading found the same wish (a reading confirmed on the review page, or at the
    ``training-camp score`` prompt, says back what the rater wrote, not "wants shorter")."""
    given = [wants.parse(w) for w in wanted]
    if not comment:
        return given
    own = analyze(score, comment, [], None, memory).aspects
    read = {wants.render(a): a for a in own}
    # praise that asks for nothing is no wish (no chip to confirm) but the verdict on the last
    # change reads it: "the length is much better now" approves the change to the length
    named = {a.aspect for a in given}
    praise = [a for a in own if a.sentiment == "positive" and not a.want and a.aspect not in named]
    return [
        _quoting(a, found)
        if (found := read.get(wants.render(a))) and found.amount == a.amount
        else a
        for a in given
    ] + praise


def _quoting(given: FeedbackAspect, found: FeedbackAspect) -> FeedbackAspect:
    """The wish the comment's reading found for a want; a tool or flow want stays the typed
    wish it is ("search the handbook" read as the tool, sent as ``tool:search``), quoting
    the rater's words."""
    if found.want == given.want:
        return found
    return given.model_copy(update={"quote": found.quote})


def _remarks(score: float, comment: str, reading: feedback_reader.Reading) -> None:
    """Under a high score, a fault only described ("a touch long", "more formal than I'd
    write") may be a remark, not a request: what its sentence names is proposed, not changed.
    A sentence that asks outright ("Cut the intro.", "could it be warmer?"), and a fault said
    after a "but", are acted on."""
    for sentence in feedback_reader.sentences(comment):
        if feedback_reader.requests_outright(sentence):
            continue
        lowered = sentence.lower()
        # what follows a "but" is the sentence's point ("Lovely, but a touch long"); a fault
        # before it is conceded ("A little long, but every section earns its place")
        turn = feedback_reader.contrast_at(lowered)
        inside = [
            w
            for w in reading.wishes
            if w.action == "add"
            and w.quote.lower() in lowered
            and not (turn is not None and lowered.find(w.quote.lower()) >= turn)
        ]
        if not inside:
            continue
        reading.wishes = [w for w in reading.wishes if w not in inside]
        why = f"said under a score of {score:g} without asking: a remark, or a wish?"
        proposed = tuple(dict.fromkeys(filter(None, (wants.render(_aspect_of(w)) for w in inside))))
        reading.unsure.append(feedback_reader.Unsure(sentence.strip(), why, proposed))


def _ironic(score: float, comment: str, reading: feedback_reader.Reading) -> None:
    """Praise under a low score ("Oh wonderful, very bold, very decisive" at 3) may be meant the
    other way: the qualities its sentences name are not acted on, and the rater is asked. A
    named fault ("even wordier") is a complaint however it is said, and a keep of a named part
    ("Nice table.") is taken at its word."""
    praising = feedback_reader.praising_sentences(comment)
    if not praising:
        return
    for sentence in feedback_reader.sentences(comment):
        if sentence not in praising and feedback_reader.asks(sentence):
            continue
        if _PREFERS.search(sentence.lower()):
            continue  # "paragraphs read better": a preference, not irony
        lowered = sentence.lower()
        inside = [
            w
            for w in reading.wishes
            if w.action == "add" and w.described and w.quote.lower() in lowered
        ]
        praised = [(a, q) for a, q in reading.praised if q.lower() in lowered and a != "overall"]
        if not inside and not praised:
            continue
        reading.wishes = [w for w in reading.wishes if w not in inside]
        reading.praised = [p for p in reading.praised if p not in praised]
        reading.criticised = [(a, q) for a, q in reading.criticised if q.lower() not in lowered]
        why = f"praise under a score of {score:g}: meant the other way?"
        reading.unsure.append(feedback_reader.Unsure(sentence.strip(), why))


def _sentiment(score: float) -> Literal["positive", "neutral", "negative"]:
    if score >= 7:
        return "positive"
    if score <= 4:
        return "negative"
    return "neutral"


def trend_of(score: float, previous_scores: list[float]) -> tuple[Trend, float]:
    """Trend and delta against the previous score (computed, never asked of a model)."""
    if not previous_scores:
        return "stable", 0.0
    delta = score - previous_scores[-1]
    if delta > TREND_EPSILON:
        return "improving", delta
    if delta < -TREND_EPSILON:
        return "declining", delta
    return "stable", delta
