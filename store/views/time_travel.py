"""Time travel: a lineage as it stood at any event or moment, and projections rebuilt from the
log and checked row for row."""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel
from sqlalchemy import Connection, Engine, select
from sqlmodel import SQLModel

from domain import want_labels
from domain.agent import AgentDefinition
from domain.events import (
    AgentCreated,
    AgentEvolved,
    ArtifactScored,
    AttemptFailed,
    DirectiveAdded,
    Event,
    EvolutionJudged,
    EvolutionKept,
    InputsSet,
    LineageBranched,
    LineageLocked,
    LineagePromoted,
    LineageUnlocked,
    LoggedWish,
    RatersAgreed,
    RaterScored,
    RatersJudged,
    ReadingCorrected,
    SpansRecorded,
    WishesStanding,
)
from domain.trainer import Amount, describe_change, verdict_line
from store.backends.database import write_transaction
from store.eventstore import event_log, payload_store
from store.records import projections
from store.tables import PROJECTION_TABLES

HISTORY_TEXT_CHARS = 80  # a prompt change's texts, cut, on its line of the history


class ScoreAt(BaseModel):
    cycle: int
    score: float
    comment: str | None
    position: int
    timestamp: int


class AsOf(BaseModel):
    lineage_id: str
    position: int  # the last event taken into account
    timestamp: int | None
    version: int | None
    definition: AgentDefinition | None
    scores: list[ScoreAt]


class HistoryEntry(BaseModel):
    position: int
    timestamp: int
    event_type: str
    summary: str


def as_of(
    engine: Engine, lineage_id: str, position: int | None = None, at_ms: int | None = None
) -> AsOf:
    """The lineage's agent definition and scores after event ``position`` (or at ``at_ms``)."""
    version: int | None = None
    definition_hash: str | None = None
    scores: list[ScoreAt] = []
    last_position, last_ts = 0, None
    with engine.connect() as conn:
        for event in event_log.read(
            conn,
            lineage_id=lineage_id,
            until_position=position,
            event_types=[c.event_type for c in (AgentCreated, AgentEvolved, ArtifactScored)],
        ):
            if at_ms is not None and event.timestamp > at_ms:
                break
            last_position, last_ts = event.position, event.timestamp
            match event.data:
                case ArtifactScored() as scored:
                    scores.append(
                        ScoreAt(
                            cycle=scored.cycle,
                            score=scored.score,
                            comment=scored.comment,
                            position=event.position,
                            timestamp=event.timestamp,
                        )
                    )
                case AgentCreated() as created:
                    version, definition_hash = created.version, created.definition_hash
                case AgentEvolved() as evolved:
                    version, definition_hash = evolved.to_version, evolved.definition_hash
        definition = (
            AgentDefinition.model_validate(payload_store.get(conn, definition_hash))
            if definition_hash
            else None
        )
    return AsOf(
        lineage_id=lineage_id,
        position=last_position,
        timestamp=last_ts,
        version=version,
        definition=definition,
        scores=scores,
    )


def _summary(
    event: Event | None,
    scored: dict[str, int | None] | None = None,
    earlier: dict[str, float] | None = None,
) -> str:
    """One line for an event; ``scored`` (evaluation id → the version whose output it scored)
    names the version a correction was rebuilt from, ``earlier`` (a rater's score's id → the
    score) the score a rater's later one replaces."""
    if (said := _panel_summary(event, earlier or {})) is not None:
        return said
    match event:
        case AgentCreated():
            return f"v{event.version} created"
        case AgentEvolved():
            changed = "; ".join(describe_change(c, limit=HISTORY_TEXT_CHARS) for c in event.changes)
            kind = event.kind
            base = (scored or {}).get(event.trigger.evaluation_id)
            if kind == "correction" and base is not None:
                # planned on the version the corrected score scored, not on the misread one
                kind = f"correction, rebuilt from v{base}"
            line = f"v{event.from_version} → v{event.to_version} ({kind}): {event.hypothesis}"
            return line + (f" Changes: {changed}" if changed else "")
        case ArtifactScored():
            comment = f": {event.comment}" if event.comment else ""
            return f"cycle {event.cycle} scored {event.score:g}{comment}"
        case EvolutionJudged():
            # the verdict as the `state` query words it (last_verdict): one function for both
            verdict = verdict_line(event.validated, event.reason)
            return f"{event.evolution_id}: {verdict} (score {event.score_delta:+g})"
        case LineageLocked() | LineageUnlocked() | DirectiveAdded():
            shown = event.payload()
            shown.pop("competitorScores", None)
            return json.dumps(shown)
        case AttemptFailed():
            return event.error[:120]
        case LineageBranched():
            return f"branched from {event.parent_lineage_id} v{event.parent_version}"
        case LineagePromoted():
            over = ", ".join(event.competing_lineage_ids) or "no other lineage"
            return f"v{event.version} promoted: the session's champion, over {over}"
        case InputsSet():
            return f"{len(event.input_hashes)} inputs"
        case WishesStanding():
            # in the chips' words, as the checklist and the review page say them
            wishes = ", ".join(_standing(w) for w in event.wishes) or "none"
            return f"v{event.version} checked against: {wishes}"
    return ""


def _panel_summary(event: Event | None, earlier: dict[str, float]) -> str | None:
    """One line for what several raters did (who scored what, superseding which; what they
    agreed on or disputed; their verdicts; a correction) and for a step that kept the agent;
    None for any other event."""
    match event:
        case RaterScored():
            line = f"cycle {event.cycle}: {event.rater} scored {event.score:g}"
            if event.wants is not None:
                line += f", asking {_chips(event.wants)}"
            if event.supersedes is not None:
                before = earlier.get(event.supersedes)
                was = f" ({before:g})" if before is not None else ""
                line += f"; replaces their earlier score{was}"
            return line + (f": {event.comment}" if event.comment else "")
        case RatersAgreed():
            voices = ", ".join(f"{v.rater} {v.score:g}" for v in event.voices)
            parts = [f"cycle {event.cycle}: median {event.score:g} of {voices}"]
            parts.append(f"agreed: {_chips(event.agreed) if event.agreed else 'nothing'}")
            for d in event.disputes:
                said = "; ".join(f"{s.rater}: {_chips([s.want])}" for s in d.said)
                parts.append(f"disputed {_chips(d.families, ' / ')} ({said})")
            if event.minority:
                parts.append(
                    "not a majority: "
                    + ", ".join(f"{_chips([s.want])} ({s.rater})" for s in event.minority)
                )
            return "; ".join(parts)
        case RatersJudged():
            each = ", ".join(
                f"{v.rater}: {_chips([v.family])} {v.verdict.replace('_', ' ')}"
                for v in event.verdicts
            )
            return f"cycle {event.cycle}: {event.evolution_id} judged by {each or 'no rater'}"
        case ReadingCorrected():
            who = f"{event.rater} " if event.rater else ""
            wants = _chips(event.corrected)
            was = _chips(event.read_as)
            return f"{who}corrected the reading of cycle {event.cycle}: {wants} (was: {was})"
        case EvolutionKept():
            why = "; ".join(event.plan.notes) or "nothing to change"
            return f"kept v{event.version}: {why}"
    return None


def _chips(wants: list[str], sep: str = ", ") -> str:
    """Wants (or families) in the chips' words, as raters see them."""
    said = []
    for want in wants:
        try:
            said.append(want_labels.label(want))
        except ValueError:
            said.append(want)
    return sep.join(said) or "no change"


def _standing(wish: LoggedWish) -> str:
    amount = Amount(**wish.amount.model_dump()) if wish.amount is not None else None
    return want_labels.standing_words(wish.family, wish.action, wish.detail, amount)


def history(engine: Engine, lineage_id: str) -> list[HistoryEntry]:
    """The lineage's events, oldest first, spans left out."""
    scored: dict[str, int | None] = {}
    earlier: dict[str, float] = {}
    entries = []
    with engine.connect() as conn:
        for e in event_log.read(conn, lineage_id=lineage_id):
            if e.event_type == SpansRecorded.event_type:
                continue
            if isinstance(e.data, ArtifactScored):
                scored[e.data.evaluation_id] = e.data.agent_version
            if isinstance(e.data, RaterScored):
                earlier[e.data.evaluation_id] = e.data.score
            entries.append(
                HistoryEntry(
                    position=e.position,
                    timestamp=e.timestamp,
                    event_type=e.event_type,
                    summary=_summary(e.data, scored, earlier),
                )
            )
    return entries


def projection_digests(conn: Connection) -> dict[str, tuple[int, str]]:
    """Per projection table: (row count, SHA-256 over its rows in key order)."""
    out = {}
    for name in PROJECTION_TABLES:
        table = SQLModel.metadata.tables[name]
        key = list(table.primary_key.columns)
        rows = conn.execute(select(table).order_by(*key)).mappings().all()
        digest = hashlib.sha256()
        for row in rows:
            digest.update(json.dumps(dict(row), sort_keys=True, default=str).encode())
        out[name] = (len(rows), digest.hexdigest())
    return out


class RebuildReport(BaseModel):
    events_replayed: int
    tables: dict[str, tuple[int, bool]]  # rows after, identical to before

    @property
    def identical(self) -> bool:
        return all(same for _, same in self.tables.values())


def rebuild_and_verify(engine: Engine, keep_if_different: bool = True) -> RebuildReport:
    """Drop every projection table, replay the whole log into new ones, compare row for row.
    Without ``keep_if_different``, a replay that differs from the stored rows is rolled back."""
    tables = [SQLModel.metadata.tables[name] for name in PROJECTION_TABLES]
    with write_transaction(engine) as conn:
        before = projection_digests(conn)
        SQLModel.metadata.drop_all(conn, tables=tables)
        SQLModel.metadata.create_all(conn, tables=tables)
        replayed = projections.rebuild(conn)
        report = _report(replayed, before, projection_digests(conn))
        if not report.identical and not keep_if_different:
            conn.rollback()
        return report


def check_projections(engine: Engine) -> RebuildReport:
    """Replay the whole log into emptied projections, compare them with the stored ones row for
    row, and roll it all back: the stored projections are left as they were, right or wrong.
    Writers wait meanwhile (readers do not)."""
    with write_transaction(engine) as conn:
        before = projection_digests(conn)
        for name in reversed(PROJECTION_TABLES):
            conn.execute(SQLModel.metadata.tables[name].delete())
        replayed = projections.rebuild(conn)
        report = _report(replayed, before, projection_digests(conn))
        conn.rollback()
    return report


def _report(
    replayed: int, before: dict[str, tuple[int, str]], after: dict[str, tuple[int, str]]
) -> RebuildReport:
    return RebuildReport(
        events_replayed=replayed,
        tables={name: (after[name][0], after[name] == before[name]) for name in PROJECTION_TABLES},
    )
