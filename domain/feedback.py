"""Human feedback payloads (signals and updates) and their validation.

Signals cannot be refused, so handlers validate with these helpers and record rejections; the
``submit_score`` update validator raises the same message so the CLI exits non-zero with it.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_COMMENT_CHARS = 4_000
MAX_DIRECTIVE_CHARS = 2_000


class FeedbackModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


F = TypeVar("F", bound=FeedbackModel)


class ScoreInput(FeedbackModel):
    # strict: "7" or true is a mistake worth reporting, not something to coerce
    score: float = Field(ge=0, le=10, strict=True)
    comment: str | None = Field(default=None, max_length=MAX_COMMENT_CHARS)
    rater: str | None = Field(default=None, max_length=200)
    cycle: int | None = Field(default=None, ge=1, strict=True)


class DirectiveInput(FeedbackModel):
    kind: Literal["sticky", "oneshot"]
    content: str = Field(min_length=1, max_length=MAX_DIRECTIVE_CHARS)


class LockInput(FeedbackModel):
    reason: str | None = Field(default=None, max_length=1_000)


class ScoreAccepted(BaseModel):
    """What ``submit_score`` returns: the score as it will be applied."""

    cycle: int | None
    score: float
    comment: str | None
    rater: str | None
    queued_position: int


class RejectedFeedback(BaseModel):
    """A signal that changed nothing; recorded so the rejection is visible later."""

    kind: str
    payload_preview: str
    reason: str


def explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "payload"
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f" (got {got!r})"
        parts.append(f"{field}: {err['msg']}{shown}")
    return "; ".join(parts)


def _validate(model: type[F], payload: Any) -> F:
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ValueError(f"expected a JSON object, got {type(payload).__name__}: {payload!r:.200}")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise ValueError(explain(exc)) from None


def parse_score(payload: Any) -> ScoreInput:
    """Validate a score payload; ValueError names the problem ("score: ... (got 11)")."""
    if isinstance(payload, dict) and "score" not in payload:
        raise ValueError("score: field required (a number from 0 to 10)")
    return _validate(ScoreInput, payload)


def parse_directive(payload: Any) -> DirectiveInput:
    return _validate(DirectiveInput, payload)


def parse_lock(payload: Any) -> LockInput:
    return _validate(LockInput, payload)


def preview(payload: Any, limit: int = 300) -> str:
    text = repr(payload)
    return text if len(text) <= limit else text[: limit - 1] + "…"
