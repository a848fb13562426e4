"""The training-signal log's events, one class per event type, defined once.

The recorder builds these to write (``store/records/``), the projections read them back
(``store/records/projections.py``), and the upcasters (``store/eventstore/upcasters.py``) bring
a payload stored under an older ``schema_version`` to today's class. Payloads are stored as
JSON with camelCase keys; the attribute names are the snake_case of those keys. Event type
names are stored in the log, so a class may be renamed freely but its ``event_type`` never
changes.

Each payload is a frozen contract: this module imports nothing of the project, and a change to
a payload's schema (``tests/data/event_schemas.json``) needs a new ``schema_version`` and an
upcaster from the one before (``tests/test_event_contracts.py``).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel


class Event(BaseModel):
    """An event's payload; the log adds its id, time and references (session, lineage…)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1
    # Leave unset fields out of the stored JSON (span batches: most span fields are empty)
    omit_none: ClassVar[bool] = False

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=self.omit_none)

    @classmethod
    def read(cls, payload: dict[str, Any]) -> Self:
        return cls.model_validate(payload)

    @classmethod
    def key(cls, field: str) -> str:
        """The stored JSON key of one field (for SQL that reads payloads in the database)."""
        return cls.model_fields[field].alias or field


# Values embedded in events. Each is the event's own frozen copy of a domain model's fields as
# the log stores them (snake_case keys, as the domain models dumped when they were embedded),
# never the domain model itself: a change to ``domain.trainer`` or ``domain.agent`` must not
# change how a stored event decodes. Writers convert with ``LoggedX.of(domain_model)``: a field
# the event does not know is dropped, a value it does not accept is refused at write time,
# never silently stored.


class Logged(BaseModel):
    model_config = ConfigDict(frozen=True)

    @classmethod
    def of(cls, value: BaseModel) -> Self:
        """The event's copy of a domain model, field by field name (validating by attribute,
        ``from_attributes``, cost thirty times as much)."""
        return cls.model_validate(value.model_dump())


class LoggedAmount(Logged):
    kind: Literal["share", "count", "limit"]
    value: float
    unit: str = "words"
    of_words: int | None = None


class LoggedAspect(Logged):
    aspect: str
    sentiment: Literal["positive", "negative"]
    quote: str | None = None
    confidence: float
    want: str | None = None
    detail: str | None = None
    action: Literal["add", "more", "less", "remove", "keep"] | None = None
    amount: LoggedAmount | None = None


class LoggedScoreAnalysis(Logged):
    score: float
    comment: str | None = None
    sentiment: Literal["positive", "neutral", "negative"]
    aspects: list[LoggedAspect] = Field(default_factory=list)
    trend: Literal["improving", "stable", "declining"]
    delta_from_previous: float = 0.0
    adversarial: bool = False
    refused: list[str] = Field(default_factory=list)
    comment_language: str | None = None
    read_by: Literal["rules", "claude"] = "rules"


LoggedComponent = Literal["systemPrompt", "tools", "flow", "parameters"]


class LoggedPromptCredit(Logged):
    segment: str
    segment_index: int
    blame: Literal["high", "medium", "low", "none"]
    related_aspect: str | None = None
    reason: str
    component: LoggedComponent = "systemPrompt"
    target: str | None = None
    want: str | None = None


class LoggedTrajectoryCredit(Logged):
    span_id: str
    contribution: float
    reason: str


class LoggedCreditAssignment(Logged):
    mode: Literal["prompt", "trajectory"]
    prompt: list[LoggedPromptCredit] = Field(default_factory=list)
    trajectory: list[LoggedTrajectoryCredit] = Field(default_factory=list)


class LoggedChange(Logged):
    component: LoggedComponent
    change_type: Literal["add", "remove", "modify"]
    target: str
    before: str | None = None
    after: str | None = None
    reason: str
    confidence: float
    aspect: str | None = None
    want: str | None = None


class LoggedExpectedImpact(Logged):
    aspect: str
    direction: Literal["improve", "maintain"]


class LoggedPastChange(Logged):
    change: LoggedChange
    outcome: Literal["improved", "worsened", "neutral"]
    score_delta: float
    lineage_id: str
    evolution_id: str


class LoggedHistoryCheck(Logged):
    proposed_change: LoggedChange
    similar_past_changes: list[LoggedPastChange] = Field(default_factory=list)
    insight_id: str | None = None
    recommendation: Literal["apply", "skip", "modify"]
    reason: str


class LoggedPlan(Logged):
    changes: list[LoggedChange] = Field(default_factory=list)
    hypothesis: str = ""
    expected_impact: list[LoggedExpectedImpact] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    history_checks: list[LoggedHistoryCheck] = Field(default_factory=list)


class LoggedDirectives(Logged):
    sticky: list[str] = Field(default_factory=list)
    oneshot: list[str] = Field(default_factory=list)


class LoggedTrigger(Logged):
    rollout_id: str
    attempt_id: str | None
    artifact_id: str
    evaluation_id: str
    score: float
    comment: str | None = None
    directives: LoggedDirectives = Field(default_factory=LoggedDirectives)


class LoggedAspectVerdict(Logged):
    aspect: str
    verdict: Literal["validated", "not_far_enough", "refuted", "untested"]
    reason: str
    family: str | None = None
    quote: str | None = None


class LoggedWish(Logged):
    """A wish standing on a lineage, with its amount (``domain.checks.ActiveWish``)."""

    family: str
    action: Literal["add", "more", "less", "remove", "keep"] = "add"
    amount: LoggedAmount | None = None
    detail: str | None = None
    quote: str = ""
    cycle: int = 0
    made_on_words: int | None = None


class LoggedAgentSnapshot(Logged):
    """The exact agent an attempt ran: its content hashes (``domain.agent.AgentSnapshot``)."""

    system_prompt_hash: str
    tools_hash: str
    flow_hash: str
    agent_id: str
    version: int


class LoggedSpan(Logged):
    """One execution span, stored under camelCase keys (``domain.execution.SpanRecord``)."""

    model_config = ConfigDict(frozen=True, alias_generator=to_camel, populate_by_name=True)

    @classmethod
    def of(cls, value: BaseModel) -> Self:
        # a span is flat: its field values as they are (spans are the log's bulk)
        return cls.model_validate(value.__dict__)

    span_id: str
    parent_span_id: str | None = None
    sequence: int
    span_type: str
    name: str | None = None
    input: str | None = None
    output: str | None = None
    model_id: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_result: str | None = None
    tool_error: str | None = None
    duration_ms: int = 0
    estimated_cost: float | None = None
    started_at: int | None = None
    trace_id: str | None = None
    otel_span_id: str | None = None


# Sessions, lineages, agent versions


class SessionCreated(Event):
    event_type = "session.created"
    session_id: str
    name: str


class DocumentAdded(Event):
    """A document the session's agents may read (the RLM examples' corpus)."""

    event_type = "session.document_added"
    session_id: str
    name: str
    content_hash: str


class LineageCreated(Event):
    event_type = "lineage.created"
    session_id: str
    lineage_id: str
    label: str
    workflow_id: str


class LineageBranched(Event):
    """A lineage started from a version of another lineage of its session: its first event,
    naming the parent and the version it starts from (byte for byte: ``definitionHash`` is that
    version's). Its agent v1 and standing wishes are the parent version's."""

    event_type = "lineage.branched"
    session_id: str
    lineage_id: str
    label: str
    workflow_id: str
    parent_lineage_id: str
    parent_version: int
    definition_hash: str
    rater: str | None = None  # who branched it


class InputsSet(Event):
    """A lineage's cycle inputs, in order (cycle n runs input n modulo their number): what a
    branch of it and a spec of its champion run on."""

    event_type = "lineage.inputs_set"
    input_hashes: list[str]


class WishesStanding(Event):
    """The wishes a lineage's outputs are checked against, and the families no change may take
    away, as a cycle step left them on ``version`` (what a branch from it starts with)."""

    event_type = "lineage.wishes_standing"
    version: int
    wishes: list[LoggedWish] = Field(default_factory=list)
    asked_for: list[str] = Field(default_factory=list)


class AgentCreated(Event):
    """Version 1 of a lineage's agent; its parts are stored by content hash."""

    event_type = "agent.created"
    agent_id: str
    lineage_id: str
    version: int
    definition_hash: str
    system_prompt_hash: str
    tools_hash: str
    flow_hash: str


class AgentEvolved(Event):
    """A new agent version and the evolution record that made it (the trainer's four steps)."""

    event_type = "agent.evolved"
    agent_id: str
    evolution_id: str
    from_version: int
    to_version: int
    definition_hash: str
    system_prompt_hash: str
    tools_hash: str
    flow_hash: str
    changes: list[LoggedChange]
    hypothesis: str
    trigger: LoggedTrigger
    score_analysis: LoggedScoreAnalysis
    credit_assignment: LoggedCreditAssignment
    plan: LoggedPlan
    kind: str = "evolution"  # or "rollback"


class EvolutionKept(Event):
    """A training step that changed nothing, with the plan's notes and history checks."""

    event_type = "evolution.kept"
    agent_id: str
    version: int
    trigger: LoggedTrigger
    score_analysis: LoggedScoreAnalysis
    plan: LoggedPlan


class EvolutionJudged(Event):
    """The next score's verdict on an evolution's hypothesis."""

    event_type = "evolution.outcome"
    evolution_id: str
    next_score: float
    score_delta: float
    validated: bool
    reason: str | None = None
    aspects: list[LoggedAspectVerdict] = Field(default_factory=list)


class InsightDiscovered(Event):
    event_type = "insight.discovered"
    insight_id: str
    pattern: str
    pattern_type: str
    contexts: list[str] = Field(default_factory=list)


class InsightTested(Event):
    """One change's outcome counted for or against its family's insight."""

    event_type = "insight.outcome"
    insight_id: str
    evolution_id: str
    success: bool
    score_delta: float


class InsightApplied(Event):
    event_type = "insight.applied"
    insight_id: str
    agent_id: str
    evolution_id: str
    change: LoggedChange


# Rollouts, attempts, spans, artifacts


class RolloutStarted(Event):
    event_type = "rollout.started"
    rollout_id: str
    cycle: int
    input_hash: str


class RolloutFailed(Event):
    """Every attempt of a cycle's rollout failed; the lineage waits for a retry or a stop."""

    event_type = "rollout.failed"
    rollout_id: str
    error: str


class AttemptStarted(Event):
    event_type = "attempt.started"
    rollout_id: str
    attempt_number: int
    agent_snapshot: LoggedAgentSnapshot
    input_hash: str
    model_id: str
    parameters: dict[str, Any]


class SpansRecorded(Event):
    """A batch of an attempt's spans, texts inline (v1 held one span, texts by hash)."""

    event_type = "attempt.span_recorded"
    schema_version = 2
    omit_none = True
    spans: list[LoggedSpan]
    # Upcast from v1 only: span id → (input hash, output hash), the texts the projection reads
    text_hashes: dict[str, tuple[str | None, str | None]] | None = None


class AttemptCompleted(Event):
    event_type = "attempt.completed"
    output_hash: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    duration_ms: int
    estimated_cost: float | None = None
    success: bool = True
    # why the model stopped ("max_tokens": the output was cut off at the token limit); absent
    # from events written before it was recorded
    stop_reason: str | None = None


class AttemptFailed(Event):
    event_type = "attempt.failed"
    error: str
    error_type: str
    retryable: bool
    duration_ms: int | None = None  # None: the attempt was lost, nobody timed it


class ArtifactCreated(Event):
    """An attempt's output, stored by content hash, awaiting its evaluation."""

    event_type = "artifact.created"
    rollout_id: str
    cycle: int
    agent_version: int
    content_hash: str


class LoggedCheck(Logged):
    family: str
    wish: str
    passed: bool
    measure: str = ""
    value: float | None = None
    target: float | None = None
    shortfall: str | None = None
    cycle: int = 0
    # False: a wish the output gave no measure of ("not checked"); stored only then, so a check
    # measured is stored byte for byte as v1 stored it
    checked: bool = Field(default=True, exclude_if=lambda checked: checked)


class OutputChecked(Event):
    """An attempt's output checked against the wishes its lineage's reviewer made and has not
    taken back: each check passed or failed, with what it measured. A revision made in the
    cycle after a failed check (``revision`` 1) is checked too; ``chosen`` marks the output
    shown for scoring (the one that passes the most checks)."""

    event_type = "output.checked"
    schema_version = 2  # v2: a check may be "not checked" (``checked``)
    rollout_id: str
    cycle: int
    agent_version: int
    revision: int = 0
    chosen: bool = True
    checks: list[LoggedCheck]


# Human feedback


class ArtifactScored(Event):
    """An evaluation: a rater's score and comment on one output (v1 held only those)."""

    event_type = "artifact.scored"
    schema_version = 2
    evaluation_id: str
    rollout_id: str
    cycle: int
    agent_version: int | None
    score: float
    comment: str | None = None
    rater: str | None = None


class RaterScored(Event):
    """One rater's score on an output of a lineage with several raters, as it arrives: the
    score, the comment, the reading the rater confirmed (``wants``, with the plan's ``changes``
    keys) and the rater's earlier score on the same output it supersedes. The cycle's own
    evaluation (``artifact.scored``) comes when the cycle goes on."""

    event_type = "rater.scored"
    evaluation_id: str
    rollout_id: str
    cycle: int
    agent_version: int
    rater: str
    score: float
    comment: str | None = None
    wants: list[str] | None = None
    changes: list[str] | None = None
    supersedes: str | None = None


class PanelVoice(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    rater: str
    score: float
    wants: list[str] = Field(default_factory=list)


class PanelSaid(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    rater: str
    want: str


class PanelDispute(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    families: list[str]
    said: list[PanelSaid] = Field(default_factory=list)


class RatersAgreed(Event):
    """What the raters of one output agreed on as the cycle went on: each rater's latest score
    and reading, the cycle's score (their median), the wants the step acted on, and the
    wishes in dispute with who said what (acted on by none)."""

    event_type = "raters.agreed"
    evaluation_id: str  # the cycle's evaluation (``artifact.scored``)
    cycle: int
    agent_version: int
    score: float
    voices: list[PanelVoice] = Field(default_factory=list)
    agreed: list[str] = Field(default_factory=list)
    disputes: list[PanelDispute] = Field(default_factory=list)
    minority: list[PanelSaid] = Field(default_factory=list)


class PanelVerdict(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    rater: str
    family: str
    verdict: str  # validated / not_far_enough / refuted / untested
    reason: str


class RatersJudged(Event):
    """Each rater's verdict on the change the scored output came from, family by family, from
    their own score and reading. The change's verdict (``evolution.outcome``) refutes a family,
    and the step rolls it back, only when a majority of the raters who judged it refute it."""

    event_type = "raters.judged"
    evolution_id: str
    evaluation_id: str  # the cycle's evaluation (``artifact.scored``)
    cycle: int
    verdicts: list[PanelVerdict] = Field(default_factory=list)


class ComparedArtifact(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    id: str
    lineage_id: str
    score: float


class PlanConfirmed(Event):
    """The plan a rater saw and confirmed with a score (the review page, ``training-camp
    score``): the wants sent, and the keys of the changes confirmed (a digest of each change:
    component, kind, target, text before and after). The step made those changes and no
    other; ``bench/version_contract.py`` checks each version against them."""

    event_type = "plan.confirmed"
    evaluation_id: str
    cycle: int
    agent_version: int  # the version the plan changes
    wants: list[str] | None = None
    changes: list[str] = Field(default_factory=list)


class ArtifactsCompared(Event):
    """Every lineage of the session has scored this cycle: their outputs, ranked."""

    event_type = "artifact.compared"
    cycle: int
    artifacts: list[ComparedArtifact]
    ranking: list[str]


class FeedbackRejected(Event):
    """A score, directive or lock the lineage refused, with why (it changed nothing)."""

    event_type = "feedback.rejected"
    rejection_id: str
    cycle: int
    kind: str
    payload_preview: str
    reason: str


class ReadingCorrected(Event):
    """A rater's correction of how the trainer read a comment: the reading it supersedes and
    the wants it should have been. A labelled example the reader learns from (comment →
    wants); the score it corrects stays as it was recorded."""

    event_type = "reading.corrected"
    correction_id: str
    session_id: str
    lineage_id: str
    evaluation_id: str  # the score whose reading this supersedes
    comment: str  # the comment as the rater wrote it (bounded at the door)
    read_as: list[str]  # the superseded reading, as wants (``domain.wants`` syntax)
    corrected: list[str]  # what it should have been read as, as wants
    rater: str | None = None  # who corrected it
    cycle: int | None = None


class DirectiveAdded(Event):
    event_type = "directive.added"
    directive_id: str
    kind: str = Field(alias="type")  # "sticky" or "oneshot"
    content: str
    cycle: int


class LineageLocked(Event):
    """The lineage stops evolving; the competitors' scores make it a preference signal."""

    event_type = "lineage.locked"
    reason: str | None = None
    cycle: int
    competing_lineage_ids: list[str] = Field(default_factory=list)
    competitor_scores: dict[str, float | None] = Field(default_factory=dict)


class LineageUnlocked(Event):
    event_type = "lineage.unlocked"
    reason: str | None = None
    cycle: int


class LineagePromoted(Event):
    """The session's champion: this lineage at ``version``, preferred to its competitors (their
    latest scores as it stands). Its outputs beat theirs on the same inputs: preference pairs."""

    event_type = "lineage.promoted"
    version: int
    cycle: int
    reason: str | None = None
    rater: str | None = None
    competing_lineage_ids: list[str] = Field(default_factory=list)
    competitor_scores: dict[str, float | None] = Field(default_factory=dict)


# Dataset optimization (Agent Lightning)


class ResourcesPublished(Event):
    event_type = "resources.published"
    server_id: str
    version: int
    content_hash: str


class TaskQueued(Event):
    event_type = "task.queued"
    rollout_id: str
    iteration: int
    sample_hash: str
    resources_version: int


class RolloutReported(Event):
    """A client's report of one dataset task's rollout (its spans come as SpansRecorded)."""

    event_type = "rollout.reported"
    rollout_id: str
    final_reward: float | None = None
    report_hash: str
    client_id: str | None = None


EVENT_CLASSES: dict[str, type[Event]] = {
    cls.event_type: cls
    for cls in (
        SessionCreated,
        DocumentAdded,
        LineageCreated,
        LineageBranched,
        InputsSet,
        WishesStanding,
        AgentCreated,
        AgentEvolved,
        EvolutionKept,
        EvolutionJudged,
        InsightDiscovered,
        InsightTested,
        InsightApplied,
        RolloutStarted,
        RolloutFailed,
        AttemptStarted,
        SpansRecorded,
        AttemptCompleted,
        AttemptFailed,
        ArtifactCreated,
        OutputChecked,
        ArtifactScored,
        PlanConfirmed,
        RaterScored,
        RatersAgreed,
        RatersJudged,
        ArtifactsCompared,
        FeedbackRejected,
        ReadingCorrected,
        DirectiveAdded,
        LineageLocked,
        LineageUnlocked,
        LineagePromoted,
        ResourcesPublished,
        TaskQueued,
        RolloutReported,
    )
}


def parse(event_type: str, payload: dict[str, Any]) -> Event | None:
    """The typed event of a stored payload in today's schema; None for a type this code does
    not know (a newer writer's, or one retired): readers skip those."""
    cls = EVENT_CLASSES.get(event_type)
    return None if cls is None else cls.read(payload)
