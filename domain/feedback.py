"""Human feedback payloads (signals and updates) and their validation.

Signals cannot be refused, so handlers validate with these helpers and record rejections; the
``submit_score`` update validator raises the same message so the CLI exits non-zero with it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)

from domain import wants as structured

MAX_COMMENT_CHARS = 4_000
MAX_DIRECTIVE_CHARS = 2_000
# How much of a bad input a rejection quotes: enough to recognise it, never the input itself
EXCERPT_CHARS = 80


def storable(text: str) -> str:
    """Text every store backend can keep: PostgreSQL refuses NUL in text, and a lone surrogate
    is not valid UTF-8 anywhere. Refused at the door, the same on SQLite and PostgreSQL."""
    if "\x00" in text:
        raise ValueError("contains a NUL character (\\x00), which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"contains {text[exc.start]!r} at position {exc.start}, which is not valid text "
            "(a lone surrogate)"
        ) from None
    return text


def _text(max_length: int, min_length: int = 0) -> Any:
    return Annotated[
        str,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(storable),
    ]


Comment = _text(MAX_COMMENT_CHARS)
Rater = _text(200)
DirectiveText = _text(MAX_DIRECTIVE_CHARS, min_length=1)
Reason = _text(1_000)


class FeedbackModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


F = TypeVar("F", bound=FeedbackModel)


Want = _text(structured.MAX_WANT_CHARS, min_length=1)
Wants = Annotated[
    list[Want], Field(max_length=structured.MAX_WANTS), AfterValidator(structured.validated)
]


class ScoreInput(FeedbackModel):
    # strict: "7" or true is a mistake worth reporting, not something to coerce
    score: float = Field(ge=0, le=10, strict=True)
    comment: Comment | None = None
    rater: Rater | None = None
    cycle: int | None = Field(default=None, ge=1, strict=True)
    # structured wishes, taken as given ("warmer", "remove:example", "shorter:half")
    wants: Wants | None = None


class CorrectReadingInput(FeedbackModel):
    """The ``correct_reading`` update: the wishes the rater meant by their last comment,
    replacing how it was read (an empty list: it asked for nothing). The rater is named: a
    correction teaches the reader, so it says whose words it labels."""

    wants: Wants
    rater: Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]


class CorrectionTaken(BaseModel):
    """What ``correct_reading`` returns, once the lineage has re-planned the change."""

    correction_id: str
    cycle: int  # the cycle whose score's reading was corrected
    reading: str  # the corrected reading, said back
    agent_version: int  # the version the lineage runs now
    # the cycle run again by that version (its output, produced by the misread version, was
    # awaiting a score), None when the output stands
    rerun_cycle: int | None = None
    error: str | None = None  # why the correction could not be taken (nothing changed)

    def outcome(self) -> str:
        """What the correction did, in one line: a cycle run again, or nothing new."""
        if self.error:
            return f"not taken: {self.error}"
        if self.rerun_cycle:
            return f"cycle {self.rerun_cycle} runs again on v{self.agent_version}"
        return f"nothing changes: the corrected reading makes v{self.agent_version} again"


class DirectiveInput(FeedbackModel):
    kind: Literal["sticky", "oneshot"]
    content: DirectiveText
    rater: Rater | None = None  # who sent it (the review app names its raters)


class LockInput(FeedbackModel):
    reason: Reason | None = None
    rater: Rater | None = None


class ScoreAccepted(BaseModel):
    """What ``submit_score`` returns: the score as it will be applied."""

    cycle: int | None
    score: float
    comment: str | None
    rater: str | None
    queued_position: int
    wants: list[str] | None = None
    # How the comment was read, said back ("Read as: warmer ('make it warmer')"), and as wants:
    # given when the score was the one the awaiting output waited for (the update returns
    # once it is taken); for a score that queues, `state` says it once it is taken
    reading: str | None = None
    read_as: list[str] | None = None


def explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        field = ".".join(str(p) for p in err["loc"]) or "payload"
        got = err.get("input")
        shown = "" if isinstance(got, dict) else f" (got {excerpt(got)})"
        parts.append(f"{field}: {err['msg']}{shown}")
    return "; ".join(parts)


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> str:
    """A short, printable quotation of a value, with its size when it was cut."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    text = (
        repr(value)
        if not isinstance(value, (dict, list)) or len(value) < 50
        else type(value).__name__ + f" of {len(value):,} items"
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _validate(model: type[F], payload: Any) -> F:
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise ValueError(
            f"expected a JSON object, got {type(payload).__name__}: {excerpt(payload)}"
        )
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


def parse_correction(payload: Any) -> CorrectReadingInput:
    """Validate a correction; ValueError names the problem (an unknown family, action or
    amount, a missing rater)."""
    if isinstance(payload, dict) and "wants" not in payload:
        raise ValueError('wants: field required (the wishes you meant, e.g. ["warmer"])')
    return _validate(CorrectReadingInput, payload)


def parse_lock(payload: Any) -> LockInput:
    return _validate(LockInput, payload)


def preview(payload: Any, limit: int = 300) -> str:
    """A bounded, storable preview of a payload (repr escapes NUL and surrogates)."""
    if isinstance(payload, dict):
        # a huge value inside: quote each field briefly, not the whole repr
        cut = limit // 3
        shown = {
            k: (v[:cut] + "…" if isinstance(v, str) and len(v) > cut else v)
            for k, v in list(payload.items())[:20]
        }
        text = repr(shown)
    else:
        text = excerpt(payload, limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"
