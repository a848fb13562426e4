"""Materializer: training examples built from the event log, incrementally and exactly once.

* reward rows: every score;
* SFT examples: scores of at least ``SFT_MIN_SCORE`` (exports can ask for more);
* preference pairs: outputs of the same session and cycle (so the same input) with different
  scores, none of them one its raters disagree on (``domain.panel.AGREEMENT_SPREAD``), a locked
  lineage's output against its competitors' for the same cycle, and a promoted champion's
  outputs against its competitors' on the same inputs.

The log is processed in windows of positions, each in one transaction with the new position: a
crash loses nothing and repeats nothing. Within a window the work is set-based SQL (a rebuild of a
million events joins and inserts in the database instead of decoding every score in Python):

1. the window's scores are staged with their output's context (session, cycle, input, answer,
   system prompt); a score stored under an older schema is read through its upcaster first;
2. each output's first score joins the scored-outputs index (``mv_scored_artifacts``);
3. reward and SFT rows come from the staged scores; a preference pair from each staged score and
   every output of the same session, cycle and input scored before it (its first score), when
   scores and answers differ;
4. each lock pairs the locked lineage's latest output scored before it with its competitors';
5. each promotion pairs every output of the champion's version made before it with every
   competitor's output of the same input made before it (scored or not: the choice is the
   rater's, whatever the scores), each pair of answers once and none the session has already.

Ids are deterministic and the first row for an id wins, in log order, so an incremental run and
a full rebuild produce the same rows, whatever the window size.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Callable

from pydantic import BaseModel
from sqlalchemy import Connection, Engine, delete, select, update
from sqlalchemy.schema import CreateIndex, DropIndex

from domain.events import ArtifactCreated, ArtifactScored, LineageLocked, LineagePromoted
from store.backends.database import write_transaction
from store.backends.dialect import (
    DriverSQL,
    TableInsert,
    backend,
    driver_cursor,
    insert_ignore,
)
from store.eventstore import event_log
from store.eventstore.read_ahead import ReadAhead
from store.records.feedback_records import RATERS_DISAGREE
from store.tables import (
    MaterializerStateRow,
    ScoredArtifactRow,
    TrainingEvent,
    TrainingExampleRow,
)

SFT_MIN_SCORE = 8.0
STATE = "training_examples"
SCORED, LOCKED = ArtifactScored.event_type, LineageLocked.event_type
PROMOTED = LineagePromoted.event_type

_examples = TrainingExampleRow.__table__  # type: ignore[attr-defined]
_scored = ScoredArtifactRow.__table__  # type: ignore[attr-defined]
_state = MaterializerStateRow.__table__  # type: ignore[attr-defined]
_events = TrainingEvent.__table__  # type: ignore[attr-defined]


class MaterializeResult(BaseModel):
    from_position: int
    to_position: int
    events_processed: int
    examples_added: int


class Materializer:
    def __init__(self, engine: Engine, batch_size: int = 50_000) -> None:
        self.engine = engine
        self.batch_size = batch_size  # positions of the log per transaction

    def position(self) -> int:
        with self.engine.connect() as conn:
            return _position(conn)

    def run(
        self, full: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> MaterializeResult:
        """Process the log from the last position (or from the start when ``full``)."""
        with write_transaction(self.engine) as conn:
            if full:
                conn.execute(delete(_examples))
                conn.execute(delete(_scored))
                _set_position(conn, 0)
                # A rebuild writes every example again: building the examples' secondary
                # indexes once at the end costs less than keeping them up to date row by row.
                # Nothing reads them meanwhile.
                for index in _examples.indexes:
                    conn.execute(DropIndex(index, if_exists=True))
            else:
                _create_indexes(conn)  # any an interrupted rebuild left out
            start, end = _position(conn), event_log.last_position(conn)
        processed = added = 0
        position = start
        with ReadAhead.for_engine(self.engine) if full else contextlib.nullcontext():
            while position < end:
                window_end = min(position + self.batch_size, end)
                with write_transaction(self.engine) as conn:
                    events, examples = _Window(conn, position, window_end).materialize()
                    processed += events
                    added += examples
                    _set_position(conn, window_end)
                position = window_end
                if progress:
                    progress(position - start, end - start)
        if full:
            with write_transaction(self.engine) as conn:
                _create_indexes(conn)
        return MaterializeResult(
            from_position=start, to_position=end, events_processed=processed, examples_added=added
        )


def _create_indexes(conn: Connection) -> None:
    for index in _examples.indexes:
        conn.execute(CreateIndex(index, if_not_exists=True))


def _position(conn: Connection) -> int:
    value = conn.execute(select(_state.c.last_position).where(_state.c.name == STATE)).scalar()
    return int(value or 0)


def _set_position(conn: Connection, position: int) -> None:
    conn.execute(insert_ignore(conn, _state, ["name"]).values(name=STATE, last_position=0))
    conn.execute(update(_state).where(_state.c.name == STATE).values(last_position=position))


# ---- the window's SQL -----------------------------------------------------------------------

# The staged scores of one window (a temporary table: the connection's own, emptied per window).
_STAGE = """CREATE TEMP TABLE IF NOT EXISTS materialize_scores (
    position BIGINT PRIMARY KEY, event_id VARCHAR NOT NULL, evaluation_id VARCHAR NOT NULL,
    artifact_id VARCHAR NOT NULL, score DOUBLE PRECISION NOT NULL, created_at BIGINT NOT NULL,
    session_id VARCHAR NOT NULL, lineage_id VARCHAR NOT NULL, cycle INTEGER NOT NULL,
    input_hash VARCHAR NOT NULL, content_hash VARCHAR NOT NULL,
    system_prompt_hash VARCHAR NOT NULL, raters_disagree INTEGER NOT NULL)"""


def _disagree(tags: str) -> str:
    """Whether an evaluation's tags say its raters' scores lie further apart than
    ``domain.panel.AGREEMENT_SPREAD``, as SQL (REPLACE: no '%' for the drivers' placeholders)."""
    return f"""{tags} <> REPLACE({tags}, '"{RATERS_DISAGREE}"', '')"""


# An output's context: its session, lineage and cycle, its input and the prompt that made it.
# A score without an output on record joins nothing: there is nothing to learn from.
_CONTEXT = "a.session_id, a.lineage_id, a.cycle, r.input_hash, a.content_hash, v.system_prompt_hash"
_CONTEXT_JOINS = """JOIN rollouts r ON r.id = a.rollout_id
    JOIN agent_versions v ON v.lineage_id = a.lineage_id AND v.version = a.agent_version"""


_EXAMPLE_COLUMNS = """(id, example_type, source, session_id, lineage_id, cycle,
    system_prompt_hash, user_input_hash, completion_hash, chosen_hash, rejected_hash, score,
    score_delta, source_events, created_at)"""


@functools.cache
def _statements(dialect: str) -> dict[str, str]:
    db = backend(dialect)
    field = db.json_text("b.content", "{0}")  # a top-level field of a payload blob, as text
    score = db.as_float("{0}")
    # Event ids are compared as Python sorts them (by code point) for the pairs' source events,
    # which are written as JSON by concatenation: event ids are UUIDs (the seed's schema; ours
    # are uuid5).
    bytewise = db.bytewise
    chosen_first = "n.score > s.score"
    sql = {
        "stage_current": f"""INSERT INTO materialize_scores
            SELECT e.position, e.id, {field.format(ArtifactScored.key("evaluation_id"))},
                e.artifact_id, {score.format(field.format(ArtifactScored.key("score")))},
                e.timestamp, {_CONTEXT},
                CASE WHEN {_disagree("e.tags")} THEN 1 ELSE 0 END
            FROM training_events e
            JOIN payload_blobs b ON b.hash = e.payload_hash
            JOIN artifacts a ON a.id = e.artifact_id
            {_CONTEXT_JOINS}
            WHERE e.position > ? AND e.position <= ? AND e.event_type = '{SCORED}'
                AND e.schema_version = {ArtifactScored.schema_version}""",
        "older_scores": f"""SELECT position FROM training_events
            WHERE position > ? AND position <= ? AND event_type = '{SCORED}'
                AND schema_version < {ArtifactScored.schema_version}""",
        "stage_one": f"""INSERT INTO materialize_scores
            SELECT ?, ?, ?, a.id, ?, ?, {_CONTEXT}, 0
            FROM artifacts a {_CONTEXT_JOINS} WHERE a.id = ?""",
        # First score of each output wins; earlier windows' scores are already in.
        "scored": """INSERT INTO mv_scored_artifacts (artifact_id, session_id, lineage_id, cycle,
                score, event_id, input_hash, content_hash)
            SELECT artifact_id, session_id, lineage_id, cycle, score, event_id, input_hash,
                content_hash
            FROM materialize_scores WHERE true ORDER BY position
            ON CONFLICT DO NOTHING""",
        **{
            kind: f"""INSERT INTO mv_training_examples {_EXAMPLE_COLUMNS}
            SELECT '{kind}:' || evaluation_id, '{kind}', 'score', session_id, lineage_id, cycle,
                system_prompt_hash, input_hash, content_hash, NULL, NULL, score, NULL,
                '["' || event_id || '"]', created_at
            FROM materialize_scores WHERE {condition} ORDER BY position
            ON CONFLICT DO NOTHING"""
            for kind, condition in (("reward", "true"), ("sft", f"score >= {SFT_MIN_SCORE}"))
        },
        # Each staged score against every other output of its session, cycle and input that was
        # scored before it; an output whose raters disagree on its score pairs with none.
        "pairs": f"""INSERT INTO mv_training_examples {_EXAMPLE_COLUMNS}
            SELECT 'preference:' || CASE WHEN {chosen_first}
                    THEN n.artifact_id || '>' || s.artifact_id
                    ELSE s.artifact_id || '>' || n.artifact_id END,
                'preference', 'comparison', n.session_id, NULL, n.cycle, NULL, n.input_hash,
                NULL,
                CASE WHEN {chosen_first} THEN n.content_hash ELSE s.content_hash END,
                CASE WHEN {chosen_first} THEN s.content_hash ELSE n.content_hash END,
                CASE WHEN {chosen_first} THEN n.score ELSE s.score END,
                ABS(n.score - s.score),
                '["' || CASE WHEN n.event_id{bytewise} < s.event_id{bytewise}
                    THEN n.event_id || '", "' || s.event_id
                    ELSE s.event_id || '", "' || n.event_id END || '"]',
                n.created_at
            FROM materialize_scores n
            JOIN mv_scored_artifacts s ON s.session_id = n.session_id AND s.cycle = n.cycle
            JOIN training_events pe ON pe.id = s.event_id
            WHERE pe.position < n.position AND s.artifact_id <> n.artifact_id
                AND s.input_hash = n.input_hash AND s.score <> n.score
                AND s.content_hash <> n.content_hash
                AND n.raters_disagree = 0 AND NOT {_disagree("pe.tags")}
            ORDER BY n.position, pe.position
            ON CONFLICT DO NOTHING""",
        "session_pairs": """SELECT chosen_hash, rejected_hash FROM mv_training_examples
            WHERE session_id = ? AND example_type = 'preference'""",
        "session_outputs": """SELECT a.id, a.lineage_id, a.cycle, a.agent_version,
                a.content_hash, r.input_hash
            FROM artifacts a JOIN rollouts r ON r.id = a.rollout_id
            WHERE a.session_id = ?""",
        "session_scored": """SELECT s.artifact_id, s.lineage_id, s.cycle, s.score, s.event_id,
                s.input_hash, s.content_hash, pe.position
            FROM mv_scored_artifacts s JOIN training_events pe ON pe.id = s.event_id
            WHERE s.session_id = ? AND pe.position < ?""",
    }
    return {name: DriverSQL(text).text(dialect) for name, text in sql.items()}


class _Window:
    """The log's positions (start, end]: its scores and locks, as examples."""

    def __init__(self, conn: Connection, start: int, end: int) -> None:
        self.conn, self.start, self.end = conn, start, end
        self.cur, dialect = driver_cursor(conn)
        self.sql = _statements(dialect)

    def materialize(self) -> tuple[int, int]:
        """(scores and locks materialized, examples added)."""
        staged = self._stage()
        added = 0
        if staged:
            self.cur.execute(self.sql["scored"])
            for examples in ("reward", "sft", "pairs"):
                self.cur.execute(self.sql[examples])
                added += max(self.cur.rowcount, 0)
        choices = list(
            event_log.read(
                self.conn,
                after_position=self.start,
                until_position=self.end,
                event_types=[LOCKED, PROMOTED],
            )
        )
        for choice in choices:
            added += self._lock(choice) if choice.event_type == LOCKED else self._promotion(choice)
        return staged + len(choices), added

    def _stage(self) -> int:
        """The window's scores with their outputs' context; returns how many scores it held."""
        cur, window = self.cur, (self.start, self.end)
        cur.execute(_STAGE)
        cur.execute("DELETE FROM materialize_scores")
        cur.execute(self.sql["stage_current"], window)
        staged = max(cur.rowcount, 0)
        cur.execute(self.sql["older_scores"], window)
        for (position,) in cur.fetchall():
            # Rare (events written before today's schema): through the upcaster, one by one.
            (event,) = event_log.read(
                self.conn, after_position=position - 1, until_position=position
            )
            scored = event.data
            assert isinstance(scored, ArtifactScored)
            cur.execute(
                self.sql["stage_one"],
                (
                    event.position,
                    event.id,
                    scored.evaluation_id,
                    scored.score,
                    event.timestamp,
                    event.artifact_id,
                ),
            )
            staged += max(cur.rowcount, 0)
        return staged

    def _lock(self, event: event_log.StoredEvent) -> int:
        """A lock is an explicit preference: the locked lineage's latest output scored before
        the lock beats each competitor's output for the same cycle and input."""
        lock = event.data
        assert isinstance(lock, LineageLocked)
        competitors = set(lock.competing_lineage_ids)
        self.cur.execute(self.sql["session_scored"], (event.session_id, event.position))
        keys = [column[0] for column in self.cur.description]
        rows = [dict(zip(keys, row, strict=True)) for row in self.cur.fetchall()]
        mine = [r for r in rows if r["lineage_id"] == event.lineage_id]
        if not mine:
            return 0
        winner = max(mine, key=lambda r: (r["cycle"], r["position"]))
        examples = [
            {
                "id": f"preference:lock:{event.id}:{loser['artifact_id']}",
                "example_type": "preference",
                "source": "lock",
                "session_id": event.session_id,
                "lineage_id": event.lineage_id,
                "cycle": winner["cycle"],
                "system_prompt_hash": None,
                "user_input_hash": winner["input_hash"],
                "completion_hash": None,
                "chosen_hash": winner["content_hash"],
                "rejected_hash": loser["content_hash"],
                "score": winner["score"],
                "score_delta": None,  # preferred whatever the scores
                "source_events": json.dumps(
                    sorted([event.id, winner["event_id"], loser["event_id"]])
                ),
                "created_at": event.timestamp,
            }
            for loser in sorted(rows, key=lambda r: r["position"])
            if loser["lineage_id"] in competitors
            and loser["cycle"] == winner["cycle"]
            and loser["input_hash"] == winner["input_hash"]  # a preference needs one prompt
            and loser["content_hash"] != winner["content_hash"]
        ]
        return _INSERT_EXAMPLES.run(self.conn, examples)

    def _promotion(self, event: event_log.StoredEvent) -> int:
        """A promotion is the rater's choice of a champion: each output its version made
        before it beats each competitor's output of the same input made before it."""
        promoted = event.data
        assert isinstance(promoted, LineagePromoted)
        self.cur.execute(self.sql["session_outputs"], (event.session_id,))
        keys = [column[0] for column in self.cur.description]
        outputs = [dict(zip(keys, row, strict=True)) for row in self.cur.fetchall()]
        made = _positions(self.conn, [o["id"] for o in outputs])
        outputs = [o for o in outputs if made.get(o["id"], event.position) < event.position]
        self.cur.execute(self.sql["session_scored"], (event.session_id, event.position))
        scored = {row[0]: row[3] for row in self.cur.fetchall()}
        mine = [
            o
            for o in outputs
            if o["lineage_id"] == event.lineage_id and o["agent_version"] == promoted.version
        ]
        rivals = set(promoted.competing_lineage_ids)
        # one example per pair of answers (two outputs alike are one answer), none the session
        # holds already (its lock's pair, a comparison's)
        self.cur.execute(self.sql["session_pairs"], (event.session_id,))
        known = set(self.cur.fetchall())
        pairs: dict[tuple[str, str], tuple[dict, dict]] = {}
        for chosen in sorted(mine, key=lambda o: (o["cycle"], o["id"])):
            for rejected in sorted(outputs, key=lambda o: (o["lineage_id"], o["cycle"], o["id"])):
                if (
                    rejected["lineage_id"] in rivals
                    and rejected["input_hash"] == chosen["input_hash"]
                    and rejected["content_hash"] != chosen["content_hash"]
                ):
                    key = (chosen["content_hash"], rejected["content_hash"])
                    if key not in known:
                        pairs.setdefault(key, (chosen, rejected))
        examples = [
            {
                "id": f"preference:promotion:{event.id}:{chosen['id']}>{rejected['id']}",
                "example_type": "preference",
                "source": "promotion",
                "session_id": event.session_id,
                "lineage_id": event.lineage_id,
                "cycle": chosen["cycle"],
                "system_prompt_hash": None,
                "user_input_hash": chosen["input_hash"],
                "completion_hash": None,
                "chosen_hash": chosen["content_hash"],
                "rejected_hash": rejected["content_hash"],
                "score": scored.get(chosen["id"]),
                "score_delta": None,  # preferred whatever the scores
                "source_events": json.dumps([event.id]),
                "created_at": event.timestamp,
            }
            for chosen, rejected in pairs.values()
        ]
        return _INSERT_EXAMPLES.run(self.conn, examples)


def _positions(conn: Connection, artifact_ids: list[str]) -> dict[str, int]:
    """Where each output's ``artifact.created`` sits in the log (found by its event id, which
    derives from the artifact's id: the log's unique index, not a scan)."""
    ids = {event_log.event_id(ArtifactCreated.event_type, a): a for a in artifact_ids}
    found: dict[str, int] = {}
    chunk = list(ids)
    for start in range(0, len(chunk), 500):
        rows = conn.execute(
            select(_events.c.id, _events.c.position).where(
                _events.c.id.in_(chunk[start : start + 500])
            )
        )
        found.update({ids[event]: position for event, position in rows})
    return found


_INSERT_EXAMPLES = TableInsert(_examples)
