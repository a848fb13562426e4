"""What a LineageWorkflow receives, carries across continue-as-new, and reports."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, Field

from domain.agent import AgentDefinition, AgentRef
from domain.checks import ActiveWish, CheckResult
from domain.content_hash import canonical_json
from domain.feedback import CorrectionTaken, ScoreInput
from domain.panel import RaterReading, RaterScore
from domain.spec import LineageOptions, SessionDocument
from domain.trainer import EvolutionOutcome

# What a lineage carries across continue-as-new, and what its `state` query returns, must stay
# far below Temporal's 2 MB payload limit however much feedback arrives: every list below is
# bounded by count and by the size of its entries (tests/test_payload_bounds.py builds the
# largest carried state these bounds allow and measures it).
#
# Directives live in the store (record_directive writes each before it steers anything): the
# trainer's step reads them there by lineage. The carried state keeps only the latest few of
# each kind (for `state`) and how many there are.
DIRECTIVES_SHOWN = 10
# Scores waiting for their output: more are refused (the update with the reason, the signal
# with a rejection record). A score is at most ~17 KB (a 4,000-character comment and a
# 200-character rater, at up to 4 bytes a character), so the queue stays under ~0.5 MB.
MAX_QUEUED_SCORES = 25
# Corrections of a reading waiting for the cycle to take them (each a few hundred bytes), and
# the latest ones remembered, so that one sent again returns what it did instead of re-doing it
MAX_QUEUED_CORRECTIONS = 3
CORRECTIONS_REMEMBERED = 5
# Each rejection reason and error shown in `state` is at most this long, and the last
# evolution's summary and verdict (which quote the changes they name) at most this
MAX_NOTE_CHARS = 1_000
MAX_SUMMARY_CHARS = 4_000

LineageStatus = Literal[
    "starting", "running", "awaiting_score", "training", "failed", "stopped", "completed"
]


class ScorePoint(BaseModel):
    cycle: int
    score: float
    agent_version: int  # the version whose output was scored
    evaluation_id: str


def score_before(history: list[ScorePoint], evaluation_id: str | None) -> float | None:
    """The last score in ``history`` but ``evaluation_id``'s (the one being trained on, which
    the history already holds): what the reward analyzer's trend compares against."""
    earlier = [p.score for p in history if p.evaluation_id != evaluation_id]
    return earlier[-1] if earlier else None


def feedback_key(lineage_id: str, kind: str, seq: int, sent: Any) -> str:
    """The store id of what a human sent: where it sits in the lineage (its kind and place in
    the sequence of such messages) and a digest of what was sent. A replay or a retried step,
    in any interleaving of signals and failed workflow tasks, derives the same id."""
    digest = hashlib.sha256(canonical_json(_jsonable(sent)).encode("utf-8")).hexdigest()[:12]
    return f"{lineage_id}:{kind}:{seq}:{digest}"


def _jsonable(value: Any) -> Any:
    """What the canonical encoder can take, for any payload a signal may carry."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        canonical_json(value)
        return value
    except (TypeError, ValueError, RecursionError):
        return repr(value)[:10_000]


def note(text: str) -> str:
    """An error or rejection as `state` shows it: one line, at most MAX_NOTE_CHARS."""
    return cut(" ".join(text.split()), MAX_NOTE_CHARS)


def cut(text: str, limit: int) -> str:
    """``text`` if it is within ``limit`` characters, else its start and an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class QueuedScore(BaseModel):
    """A validated score waiting for the artifact it applies to (survives continue-as-new)."""

    score: ScoreInput
    received_via: Literal["signal", "update"]


class QueuedCorrection(BaseModel):
    """A validated correction of the last score's reading, waiting for the cycle to take it."""

    correction_id: str  # domain.corrections.correction_key: the score's and the wants'
    evaluation_id: str  # the score whose reading it replaces
    wants: list[str]
    rater: str
    cycle: int = 0  # that score's cycle


class CarriedState(BaseModel):
    """Everything a lineage needs to resume in a new run, after continue-as-new."""

    cycle: int = 0  # last cycle started
    agent: AgentRef
    input_hashes: list[str]
    score_history: list[ScorePoint] = Field(default_factory=list)  # the last 200
    queued_scores: list[QueuedScore] = Field(default_factory=list)  # MAX_QUEUED_SCORES at most
    # The latest DIRECTIVES_SHOWN of each kind (all of them are in the store) and the counts
    sticky_directives: list[str] = Field(default_factory=list)
    oneshot_directives: list[str] = Field(default_factory=list)  # awaiting the next evolution
    sticky_count: int = 0
    oneshot_count: int = 0
    # Oneshot directives up to this place in the feedback sequence have been applied
    oneshot_after: int = 0
    locked: bool = False
    # promoted: the session's champion is this lineage at this version
    champion_version: int | None = None
    stop_requested: bool = False
    # The latest evolution awaiting its outcome (filled by the next score)
    pending_evolution_id: str | None = None
    # Directives, locks and rejections received so far: each one's place in the lineage, from
    # which its store id derives (a retried or replayed step writes under the same id)
    feedback_seq: int = 0
    latest_output_preview: str | None = None
    latest_output_words: int = 0
    latest_output_cut_off: bool = False
    # The output awaiting a score (its rollout's id), None while none does: one being scored,
    # or replaced by a correction's re-run. A score naming another output is refused.
    output_id: str | None = None
    # The latest output's checks against the active wishes, and whether it was revised
    latest_checks: list[CheckResult] = Field(default_factory=list)  # MAX_ACTIVE_WISHES at most
    latest_revised: bool = False
    last_evolution: str | None = None
    # The verdict of the last score on the change before it, with the words it rests on
    last_verdict: str | None = None
    # How the last score's comment was read, said back to the rater, and as wants (the
    # wishes a correction starts from)
    last_reading: str | None = None
    last_wants: list[str] = Field(default_factory=list)
    # The last score's cycle step, which a correction of its reading takes again (small: ids,
    # the score and the agent's version)
    last_step: CycleStepInput | None = None
    queued_corrections: list[QueuedCorrection] = Field(default_factory=list)
    corrections_done: list[CorrectionTaken] = Field(default_factory=list)  # the latest few
    # Families the reviewer asked for or approved and has not reversed: no change removes them
    asked_for: list[str] = Field(default_factory=list)
    # The wishes every output is checked against, with their amounts (MAX_ACTIVE_WISHES at most)
    active_wishes: list[ActiveWish] = Field(default_factory=list)
    rejected_count: int = 0
    # What the `state` query surfaces until it is superseded, whichever run reports it
    last_rejection: str | None = None
    recent_rejections: list[str] = Field(default_factory=list)  # the last few, oldest first
    last_error: str | None = None
    # Several raters (options.raters): each rater's latest score on the output awaiting
    # scores (at most one per rater, 20 raters: their earlier scores are in the store), how
    # far the scoring is, and the disagreements the last step said back
    rater_scores: list[RaterScore] = Field(default_factory=list)
    scores_progress: str | None = None
    disputes: list[str] = Field(default_factory=list)
    # each rater's reading of the last step (at most one per rater): what a rater's correction
    # of their own reading supersedes
    rater_readings: list[RaterReading] = Field(default_factory=list)


class BranchOrigin(BaseModel):
    """Where a branch starts: a version of another lineage of the same session."""

    lineage_id: str
    version: int = Field(ge=1)
    rater: str | None = None  # who branched it


class LineageInput(BaseModel):
    session_id: str
    session_name: str
    lineage_id: str
    label: str
    options: LineageOptions = Field(default_factory=LineageOptions)
    # First run only: the initial agent and the cycle inputs, registered by an activity
    initial_agent: AgentDefinition | None = None
    inputs: list[str] | None = None
    documents: list[SessionDocument] | None = None
    carried: CarriedState | None = None
    # First run of a branch: the agent, inputs and standing wishes are that version's, read
    # from the store (``initial_agent`` and ``inputs`` stay unset)
    branch: BranchOrigin | None = None


class LineageState(BaseModel):
    """The `state` query."""

    session_id: str
    lineage_id: str
    label: str
    cycle: int
    status: LineageStatus
    agent_version: int
    locked: bool
    latest_output_preview: str | None
    latest_output_words: int
    champion_version: int | None = None  # promoted: the session's champion at this version
    # the model stopped at the token limit: the output is cut off, not finished
    latest_output_cut_off: bool = False
    # the output awaiting a score (its rollout's id; a score may name it as `output_id`), None
    # while none does
    output_id: str | None = None
    # the latest output checked against the active wishes: "✓ about 90 words (88) · ✗ no table"
    latest_checklist: str | None = None
    latest_checks: list[CheckResult] = Field(default_factory=list)
    latest_revised: bool = False  # it is a revision, made in the cycle after a failed check
    last_evolution: str | None
    last_verdict: str | None = None
    last_reading: str | None = None  # how the last comment was read: "Read as: …"
    last_wants: list[str] = Field(default_factory=list)  # that reading as wants, to correct
    asked_for: list[str] = Field(default_factory=list)
    active_wishes: list[ActiveWish] = Field(default_factory=list)
    score_history: list[ScorePoint]
    queued_scores: int
    # Corrections waiting to be taken, and what the latest few did (a correction's update
    # answers once it is queued; its re-plan and re-run are reported here)
    corrections_waiting: int = 0
    corrections: list[CorrectionTaken] = Field(default_factory=list)
    # The latest few (DIRECTIVES_SHOWN) of each kind; the counts say how many there are
    sticky_directives: list[str]
    oneshot_directives: list[str]
    rejected_feedback: int
    last_rejection: str | None = None
    # The last few rejections (up to 10), oldest first: a burst of bad input is seen whole
    recent_rejections: list[str] = Field(default_factory=list)
    last_error: str | None = None
    run_cycles: int = 0
    sticky_count: int = 0
    oneshot_count: int = 0
    # who reads its comments (the lineage's options): a preview reads them the same way
    trainer: Literal["rules", "claude", "rules+claude"] = "rules"
    trainer_model: str = ""
    # the lineage's options: a branch of it starts with the same
    options: LineageOptions = Field(default_factory=LineageOptions)
    # Several raters: who has scored the output awaiting scores, who is still to score, the
    # line that says so ("2 of 3 scored (cy still to score)"), what each has said so far, and
    # the disagreements the last step acted on none of (with who said what)
    scored_by: list[str] = Field(default_factory=list)
    still_to_score: list[str] = Field(default_factory=list)
    scores_progress: str | None = None
    rater_scores: list[RaterScore] = Field(default_factory=list)
    disputes: list[str] = Field(default_factory=list)
    # each rater's reading of the last step (what each may correct: their own only)
    rater_readings: list[RaterReading] = Field(default_factory=list)


class LineageResult(BaseModel):
    lineage_id: str
    cycles: int
    agent_version: int
    status: LineageStatus
    score_history: list[ScorePoint]


# ---- activity inputs and outputs -------------------------------------------------------------


class RegisterLineageInput(BaseModel):
    session_id: str
    session_name: str
    lineage_id: str
    label: str
    agent: AgentDefinition | None = None  # None for a branch: the parent version's
    inputs: list[str] = Field(default_factory=list)  # a branch's are its parent's
    documents: list[SessionDocument] = Field(default_factory=list)
    branched_from: BranchOrigin | None = None


class RegisterLineageResult(BaseModel):
    agent: AgentRef
    input_hashes: list[str]
    last_cycle: int = 0
    # a branch's standing wishes and what no change may take away: its parent version's
    wishes: list[ActiveWish] = Field(default_factory=list)
    asked_for: list[str] = Field(default_factory=list)


class RunAgentInput(BaseModel):
    session_id: str
    lineage_id: str
    rollout_id: str
    cycle: int
    agent: AgentRef
    input_hash: str
    max_attempts: int
    # the lineage's active wishes, which the output is checked against, and how many revisions
    # a failed check earns in this cycle
    wishes: list[ActiveWish] = Field(default_factory=list)
    revision_attempts: int = 0


class RunAgentResult(BaseModel):
    rollout_id: str
    attempt_id: str
    artifact_id: str
    output_preview: str
    output_chars: int
    output_words: int = 0
    total_tokens: int
    cut_off: bool = False  # the model stopped at the token limit
    checks: list[CheckResult] = Field(default_factory=list)  # of the output shown
    revised: bool = False  # the output shown is a revision


class RolloutFailedInput(BaseModel):
    session_id: str
    lineage_id: str
    rollout_id: str
    error: str


class RecordRejectionInput(BaseModel):
    session_id: str
    lineage_id: str
    rejection_id: str
    cycle: int
    kind: str
    payload_preview: str
    reason: str


class RecordDirectiveInput(BaseModel):
    session_id: str
    lineage_id: str
    directive_id: str
    cycle: int
    kind: Literal["sticky", "oneshot"]
    content: str


class RecordLockInput(BaseModel):
    session_id: str
    lineage_id: str
    event_key: str
    cycle: int
    locked: bool
    reason: str | None


class RecordPromotionInput(BaseModel):
    session_id: str
    lineage_id: str
    event_key: str
    cycle: int
    version: int
    lock: bool  # the lineage was not locked: the promotion locks it
    reason: str | None = None
    rater: str | None = None


class CycleStepInput(BaseModel):
    """A score, and the cycle step it starts: judge the last change, roll back what the comment
    refuted, train on the comment (unless ``train`` is False: a locked lineage), record it all.
    Small: the agent, the output and the pending evolution are read from the store by id."""

    session_id: str
    lineage_id: str
    evaluation_id: str
    artifact_id: str
    rollout_id: str
    cycle: int
    agent: AgentRef  # the version that produced the scored output
    score: ScoreInput
    pending_evolution_id: str | None = None
    # Families the reviewer asked for or approved in earlier cycles: no change takes them away
    asked_for: list[str] = Field(default_factory=list)
    # The wishes outputs are checked against before this step (with their amounts)
    wishes: list[ActiveWish] = Field(default_factory=list)
    # The score before this one, for the reward analyzer's trend (None on the first)
    previous_score: float | None = None
    # The directives are read from the store, not carried here (there may be thousands):
    # sticky ones up to this place in the lineage's feedback sequence, oneshot ones after
    # ``oneshot_after`` up to it
    directives_through: int = 0
    oneshot_after: int = 0
    trainer: Literal["rules", "claude", "rules+claude"] = "rules"
    trainer_model: str = "claude-sonnet-5"
    train: bool = True
    rollback_refuted: bool = True
    # A correction of this step's reading, taken again: the version the lineage runs now, which
    # the version it makes follows (None: the step as the score first set it off)
    corrects: int | None = None
    # Several raters: each one's latest score on the output; the step acts on what they
    # agree on (domain/panel.py), ``score`` holding their median and their comments
    panel: list[RaterScore] | None = None


class RecordRaterScoreInput(BaseModel):
    session_id: str
    lineage_id: str
    artifact_id: str
    rollout_id: str
    cycle: int
    agent_version: int
    score: RaterScore


class CycleStepResult(BaseModel):
    """What the step did. The score is always recorded; ``training_error`` says why training
    failed for good (the lineage keeps its version and goes on)."""

    verdict: EvolutionOutcome | None = None  # on the pending evolution, if there was one
    evolution_id: str | None = None  # the new evolution, awaiting its own verdict
    agent: AgentRef  # the version the next cycle runs
    asked_for: list[str] = Field(default_factory=list)
    wishes: list[ActiveWish] = Field(default_factory=list)  # active after the step
    summary: str = ""  # one line for people: what changed and why, or why nothing did
    # how the comment was read, said back in one line ("Read as: warmer ('make it warmer')"),
    # and as wants ("warmer", "remove:example")
    reading: str | None = None
    wants: list[str] = Field(default_factory=list)
    report: list[str] = Field(default_factory=list)  # skipped, kept, rolled back, not understood
    training_error: str | None = None
