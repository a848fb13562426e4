"""Human feedback payloads (signals and updates) and their validation.

Signals cannot be refused, so handlers validate with these helpers and record rejections; the
``submit_score`` update validator raises the same message so the CLI exits non-zero with it.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from domain import wants as structured
from domain.redaction import redact
from domain.refusals import EXCERPT_CHARS, MAX_REASON_CHARS, bounded, excerpt
from domain.trainer import CHANGE_KEY_CHARS, MAX_PLANNED_CHANGES

MAX_COMMENT_CHARS = 4_000
MAX_DIRECTIVE_CHARS = 2_000
MAX_RATER_CHARS = 100
MAX_ID_CHARS = 300  # an output's or a score's id, as a score or a correction names it
# Characters that act on a terminal or reorder the text around them (controls, bidi and other
# format characters, line and paragraph separators): never in a name, escaped when said back
_UNSHOWN = ("Cc", "Cf", "Zl", "Zp")
# A payload's problems said back: at most this many, in at most this many characters
EXPLAINED = 5
EXPLAIN_CHARS = MAX_REASON_CHARS - 40


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


def redacted(text: str) -> str:
    """``text`` with anything credential-shaped masked ("[redacted]"), in every encoding
    ``domain.redaction`` looks through: people paste keys into comments, and what they send is
    stored, carried in the workflow, exported and said back."""
    return redact(text)


def plain_name(name: str) -> str:
    """A name as people see it: no control, bidi or other invisible formatting character (a
    name is shown beside other people's words, and never rewrites them)."""
    for position, char in enumerate(name):
        if unicodedata.category(char) in _UNSHOWN:
            raise ValueError(
                f"a name may not contain control or bidi characters; found U+{ord(char):04X} "
                f"at position {position}"
            )
    return name


def escaped(text: str) -> str:
    """``text`` said back as data: every control, bidi or format character as an escape."""
    return "".join(
        (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        if unicodedata.category(c) in _UNSHOWN
        else c
        for c in text
    )


def _text(max_length: int, min_length: int = 0) -> Any:
    return Annotated[
        str,
        StringConstraints(min_length=min_length, max_length=max_length),
        AfterValidator(storable),
        AfterValidator(redacted),
    ]


Comment = _text(MAX_COMMENT_CHARS)


def _name(min_length: int = 0) -> Any:
    return Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=min_length, max_length=MAX_RATER_CHARS),
        AfterValidator(storable),
        AfterValidator(plain_name),
        AfterValidator(redacted),
    ]


Rater = _name()
NamedRater = _name(min_length=1)  # a correction says whose words it labels
DirectiveText = _text(MAX_DIRECTIVE_CHARS, min_length=1)
Reason = _text(1_000)
OutputId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_CHARS, strict=True)]


def _change_keys(keys: list[str]) -> list[str]:
    """The keys of a confirmed plan's changes, each as the preview gives it (12 hex digits),
    in order, once each."""
    for key in keys:
        if len(key) != CHANGE_KEY_CHARS or any(c not in "0123456789abcdef" for c in key):
            raise ValueError(
                f"{excerpt(key)} is not a change's key (12 hex digits, as the preview of the "
                "reading gives them)"
            )
    return list(dict.fromkeys(keys))


ChangeKeys = Annotated[
    list[Annotated[str, StringConstraints(strict=True)]],
    Field(max_length=MAX_PLANNED_CHANGES),
    AfterValidator(_change_keys),
]


class FeedbackModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


F = TypeVar("F", bound=FeedbackModel)


Want = _text(structured.MAX_SENT_WANT_CHARS, min_length=1)  # each parsed to its own bound
Wants = Annotated[
    list[Want], Field(max_length=structured.MAX_WANTS), AfterValidator(structured.validated)
]


class ScoreInput(FeedbackModel):
    # strict: "7" or true is a mistake worth reporting, not something to coerce
    score: float = Field(ge=0, le=10, strict=True)
    comment: Comment | None = None
    rater: Rater | None = None
    cycle: int | None = Field(default=None, ge=1, strict=True)
    # the output judged (`state.output_id`, its rollout's id): refused once that output is
    # replaced (a correction's re-run) or scored, where a cycle number would still match
    output_id: OutputId | None = None
    # structured wishes, taken as given ("warmer", "remove:example", "shorter:half")
    wants: Wants | None = None
    # the plan the rater saw and confirmed, as its changes' keys (the preview's `changes`):
    # the step makes these changes and no other ([] : none); without it the step plans on
    # its own and says back after what it did
    changes: ChangeKeys | None = None


class CorrectReadingInput(FeedbackModel):
    """The ``correct_reading`` update: the wishes the rater meant by a comment, replacing how
    it was read (an empty list: it asked for nothing). It names the score it corrects — its
    ``evaluation_id`` (``state.score_history[-1]``, the say-back's ``evaluation_id``) or its
    ``cycle`` — and the rater: a correction teaches the reader, so it says whose words it
    labels (by default only the scorer may correct a score's reading)."""

    wants: Wants
    rater: NamedRater
    evaluation_id: OutputId | None = None
    cycle: int | None = Field(default=None, ge=1, strict=True)

    @model_validator(mode="after")
    def _names_a_score(self) -> CorrectReadingInput:
        if self.evaluation_id is None and self.cycle is None:
            raise ValueError(
                "name the score you correct: its evaluation_id (the say-back's, or "
                "state.score_history[-1].evaluation_id) or its cycle"
            )
        return self


class CorrectionTaken(BaseModel):
    """What a correction did, once the lineage has re-planned the change (``state``'s
    ``corrections``, the latest few)."""

    correction_id: str
    cycle: int  # the cycle whose score's reading was corrected
    reading: str  # the corrected reading, said back
    agent_version: int  # the version the lineage runs now
    # the cycle run again by that version (its output, produced by the misread version, was
    # awaiting a score), None when the output stands
    rerun_cycle: int | None = None
    error: str | None = None  # why the correction could not be taken (nothing changed)
    rater: str | None = None  # who corrected it (validated at the door: plain text)

    def outcome(self) -> str:
        """What the correction did, in one line: a cycle run again, or nothing new."""
        if self.error:
            return f"not taken: {self.error}"
        if self.rerun_cycle:
            return f"cycle {self.rerun_cycle} runs again on v{self.agent_version}"
        return f"nothing changes: the corrected reading makes v{self.agent_version} again"


class CorrectionAccepted(BaseModel):
    """What ``correct_reading`` returns at once, without waiting for the re-plan (an update
    held open would take one of the ten update slots Temporal gives a workflow, which scores
    need): the correction queued, or, sent again, what it did. ``state.corrections`` and
    ``await_output`` report the outcome; ``client.correct_reading`` waits for it."""

    correction_id: str
    evaluation_id: str  # the score whose reading it corrects
    cycle: int  # that score's cycle
    queued_position: int | None = None  # 1: next; None once done
    done: CorrectionTaken | None = None


class DirectiveInput(FeedbackModel):
    kind: Literal["sticky", "oneshot"]
    content: DirectiveText
    rater: Rater | None = None  # who sent it (the review app names its raters)


class LockInput(FeedbackModel):
    reason: Reason | None = None
    rater: Rater | None = None


class PromoteInput(FeedbackModel):
    """The ``promote`` update: this lineage at ``version`` (default: the version whose output
    it shows) is the session's champion."""

    version: int | None = Field(default=None, ge=1, strict=True)
    reason: Reason | None = None
    rater: Rater | None = None


class Promoted(BaseModel):
    """What ``promote`` returns: the champion, and the competitors it was preferred to with
    their latest scores (None: not scored yet)."""

    lineage_id: str
    version: int
    newly_locked: bool  # False: it was locked already
    competitor_scores: dict[str, float | None]


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
    # the score's id, given with its reading: a correction of that reading names it
    evaluation_id: str | None = None
    output_id: str | None = None  # the output it judged
    # several raters (options.raters): how far the output's scoring is ("2 of 3 scored")
    scores_progress: str | None = None
    # several raters: the rater's earlier score on the same output, which this one replaces
    replaces: float | None = None

    def said(self) -> str:
        """How a client says it was taken: "score 3 accepted for cycle 4; it replaces your
        earlier score (4)" (the reading, when given, follows)."""
        where = f"cycle {self.cycle}" if self.cycle else "the next output (queued)"
        line = f"score {self.score:g} accepted for {where}"
        if self.replaces is not None:
            line += f"; it replaces your earlier score ({self.replaces:g})"
        return line


def explain(exc: ValidationError) -> str:
    """What is wrong with a payload, field by field, within a refusal's bound: the first few
    problems, the rest counted. Pydantic's messages are followed by the input they refuse; the
    project's validators' messages ("Value error, …") quote what they refuse themselves, so
    their input is not quoted again."""
    errors = exc.errors()
    parts: list[str] = []
    for shown, err in enumerate(errors):
        field = ".".join(str(p) for p in err["loc"]) or "payload"
        if len(field) > EXCERPT_CHARS:  # an unknown key is input too
            field = excerpt(field)
        got = err.get("input")
        quoted = err["type"] == "value_error" or isinstance(got, dict)
        part = f"{field}: {err['msg'].removeprefix('Value error, ')}"
        part += "" if quoted else f" (got {excerpt(got)})"
        # room kept for the count of the rest, and for the kind a signal's record adds
        if parts and (shown == EXPLAINED or len("; ".join([*parts, part])) > EXPLAIN_CHARS):
            parts.append(f"and {len(errors) - shown} more")
            break
        parts.append(part)
    return bounded("; ".join(parts))


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
        # the reason quotes the input: nothing credential-shaped is quoted back or recorded
        raise ValueError(bounded(redact(explain(exc)))) from None


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


def parse_promotion(payload: Any) -> PromoteInput:
    return _validate(PromoteInput, {} if payload is None else payload)


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
