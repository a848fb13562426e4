"""Reward Analyzer: score + comment → sentiment, aspects, trend, delta."""

from __future__ import annotations

import re

from domain.trainer import FeedbackAspect, ScoreAnalysis
from trainer import aspects

TREND_EPSILON = 0.5


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
    if previous_scores:
        delta = score - previous_scores[-1]
        trend = (
            "improving"
            if delta > TREND_EPSILON
            else "declining"
            if delta < -TREND_EPSILON
            else "stable"
        )
    else:
        delta, trend = 0.0, "stable"
    return ScoreAnalysis(
        score=score,
        comment=comment or None,
        sentiment=sentiment,
        aspects=found,
        trend=trend,
        delta_from_previous=delta,
    )
