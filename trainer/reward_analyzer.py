"""Reward Analyzer: score + comment → sentiment, aspects, trend, delta."""

from __future__ import annotations

import re
from typing import Literal

from domain.trainer import FeedbackAspect, ScoreAnalysis
from trainer import aspects

TREND_EPSILON = 0.5
Trend = Literal["improving", "stable", "declining"]


def analyze(score: float, comment: str | None, previous_scores: list[float]) -> ScoreAnalysis:
    comment = (comment or "").strip()
    if score >= 7:
        sentiment = "positive"
    elif score <= 4:
        sentiment = "negative"
    else:
        sentiment = "neutral"
    found = aspects.extract(comment, sentiment) if comment else []
    if not found and comment and re.search(aspects.PRAISE, comment.lower()) and score >= 7:
        found = [
            FeedbackAspect(
                aspect="overall", sentiment="positive", quote=comment[:80], confidence=0.6
            )
        ]
    trend, delta = trend_of(score, previous_scores)
    return ScoreAnalysis(
        score=score,
        comment=comment or None,
        sentiment=sentiment,
        aspects=found,
        trend=trend,
        delta_from_previous=delta,
    )


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
