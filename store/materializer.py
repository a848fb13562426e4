"""Materializer: training examples built from the event log, incrementally and exactly once.

* reward rows: every score;
* SFT examples: scores of at least ``SFT_MIN_SCORE`` (exports can ask for more);
* preference pairs: outputs of the same session and cycle (so the same input) with different
  scores, and a locked lineage's output against its competitors' for the same cycle.

Events are processed in log order, in batches, each batch in one transaction with the new
position: a crash loses nothing and repeats nothing, and ids are deterministic, so an incremental
run and a full rebuild produce the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import islice
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, Engine, delete, select, update
from sqlalchemy.schema import CreateIndex, DropIndex

from store import event_log
from store.dialect import TableInsert, insert_ignore
from store.event_log import StoredEvent
from store.tables import (
    AgentVersionRow,
    ArtifactRow,
    MaterializerStateRow,
    RolloutRow,
    ScoredArtifactRow,
    TrainingExampleRow,
)

SFT_MIN_SCORE = 8.0
STATE = "training_examples"
RELEVANT = ["artifact.scored", "lineage.locked"]

_examples = TrainingExampleRow.__table__  # type: ignore[attr-defined]
_scored = ScoredArtifactRow.__table__  # type: ignore[attr-defined]
_state = MaterializerStateRow.__table__  # type: ignore[attr-defined]
_artifacts = ArtifactRow.__table__  # type: ignore[attr-defined]
_rollouts = RolloutRow.__table__  # type: ignore[attr-defined]
_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]


class MaterializeResult(BaseModel):
    from_position: int
    to_position: int
    events_processed: int
    examples_added: int


class Materializer:
    def __init__(self, engine: Engine, batch_size: int = 5000) -> None:
        self.engine = engine
        self.batch_size = batch_size

    def position(self) -> int:
        with self.engine.connect() as conn:
            return _position(conn)

    def run(
        self, full: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> MaterializeResult:
        """Process the log from the last position (or from the start when ``full``)."""
        with self.engine.begin() as conn:
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
        while True:
            with self.engine.begin() as conn:
                events = list(
                    islice(
                        event_log.read(
                            conn,
                            after_position=position,
                            until_position=end,
                            event_types=RELEVANT,
                            batch_size=self.batch_size,
                        ),
                        self.batch_size,
                    )
                )
                batch = _Batch(conn)
                batch.prefetch(events)
                for event in events:
                    batch.process(event)
                added += batch.flush()
                position = events[-1].position if len(events) == self.batch_size else end
                _set_position(conn, position)
            processed += len(events)
            if progress:
                progress(position - start, end - start)
            if position >= end:
                break
        if full:
            with self.engine.begin() as conn:
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


class _Batch:
    """One batch: bulk look-ups, then rows; scored outputs seen earlier in the batch count."""

    CHUNK = 500  # ids per IN (...) query

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.examples: dict[str, dict[str, Any]] = {}
        self.scored: dict[str, dict[str, Any]] = {}
        self._scored_by_cycle: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._context: dict[str, dict[str, Any]] = {}
        self._stored_peers: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def _context_query(self) -> Any:
        return (
            select(
                _artifacts.c.id,
                _artifacts.c.session_id,
                _artifacts.c.lineage_id,
                _artifacts.c.cycle,
                _artifacts.c.content_hash,
                _rollouts.c.input_hash,
                _versions.c.system_prompt_hash,
            )
            .join(_rollouts, _rollouts.c.id == _artifacts.c.rollout_id)
            .join(
                _versions,
                (_versions.c.lineage_id == _artifacts.c.lineage_id)
                & (_versions.c.version == _artifacts.c.agent_version),
            )
        )

    def prefetch(self, events: list[StoredEvent]) -> None:
        """Bulk look-ups for a whole batch: the scored outputs' context, and earlier scores of
        the same sessions and cycles."""
        ids = sorted({e.artifact_id for e in events if e.artifact_id})
        for i in range(0, len(ids), self.CHUNK):
            chunk = ids[i : i + self.CHUNK]
            rows = self.conn.execute(self._context_query().where(_artifacts.c.id.in_(chunk)))
            for row in rows.mappings():
                self._context[row["id"]] = dict(row)
            for artifact_id in chunk:
                self._context.setdefault(artifact_id, {})
        keys = {(c["session_id"], c["cycle"]) for c in self._context.values() if c}
        sessions = sorted({s for s, _ in keys})
        for i in range(0, len(sessions), self.CHUNK):
            rows = self.conn.execute(
                select(_scored).where(
                    _scored.c.session_id.in_(sessions[i : i + self.CHUNK]),
                    _scored.c.cycle.in_(sorted({c for _, c in keys})),
                )
            )
            for row in rows.mappings():
                self._stored_peers.setdefault((row["session_id"], row["cycle"]), []).append(
                    dict(row)
                )
        for key in keys:
            self._stored_peers.setdefault(key, [])

    def process(self, event: StoredEvent) -> None:
        if event.event_type == "artifact.scored":
            self._scored_event(event)
        else:
            self._lock_event(event)

    def _artifact(self, artifact_id: str) -> dict[str, Any] | None:
        if artifact_id not in self._context:
            row = (
                self.conn.execute(self._context_query().where(_artifacts.c.id == artifact_id))
                .mappings()
                .first()
            )
            self._context[artifact_id] = dict(row) if row else {}
        return self._context[artifact_id] or None

    def _peers(self, session_id: str, cycle: int) -> list[dict[str, Any]]:
        stored = self._stored_peers.get((session_id, cycle))
        if stored is None:
            query = select(_scored).where(
                _scored.c.session_id == session_id, _scored.c.cycle == cycle
            )
            stored = [dict(r) for r in self.conn.execute(query).mappings()]
        peers = {row["artifact_id"]: row for row in stored}
        for row in self._scored_by_cycle.get((session_id, cycle), []):
            peers[row["artifact_id"]] = row
        return list(peers.values())

    def _scored_event(self, event: StoredEvent) -> None:
        p = event.payload
        artifact_id = event.artifact_id or ""
        context = self._artifact(artifact_id)
        if context is None:
            return  # no output on record for this score: nothing to learn from
        score = float(p["score"])
        base = {
            "session_id": context["session_id"],
            "lineage_id": context["lineage_id"],
            "cycle": context["cycle"],
            "user_input_hash": context["input_hash"],
            "created_at": event.timestamp,
        }
        sources = json.dumps([event.id])
        self._add(
            f"reward:{p['evaluationId']}",
            example_type="reward",
            source="score",
            system_prompt_hash=context["system_prompt_hash"],
            completion_hash=context["content_hash"],
            score=score,
            source_events=sources,
            **base,
        )
        if score >= SFT_MIN_SCORE:
            self._add(
                f"sft:{p['evaluationId']}",
                example_type="sft",
                source="score",
                system_prompt_hash=context["system_prompt_hash"],
                completion_hash=context["content_hash"],
                score=score,
                source_events=sources,
                **base,
            )
        for peer in self._peers(context["session_id"], context["cycle"]):
            if peer["artifact_id"] == artifact_id or peer["score"] == score:
                continue
            if peer["content_hash"] == context["content_hash"]:
                continue  # identical outputs: nothing to prefer
            if peer["input_hash"] != context["input_hash"]:
                continue  # a preference needs the same prompt
            mine = {
                "hash": context["content_hash"],
                "id": artifact_id,
                "score": score,
                "event": event.id,
            }
            theirs = {
                "hash": peer["content_hash"],
                "id": peer["artifact_id"],
                "score": peer["score"],
                "event": peer["event_id"],
            }
            chosen, rejected = (mine, theirs) if score > peer["score"] else (theirs, mine)
            self._add(
                f"preference:{chosen['id']}>{rejected['id']}",
                example_type="preference",
                source="comparison",
                chosen_hash=chosen["hash"],
                rejected_hash=rejected["hash"],
                score=chosen["score"],
                score_delta=chosen["score"] - rejected["score"],
                source_events=json.dumps(sorted([chosen["event"], rejected["event"]])),
                **{**base, "lineage_id": None},
            )
        scored = {
            "artifact_id": artifact_id,
            "session_id": context["session_id"],
            "lineage_id": context["lineage_id"],
            "cycle": context["cycle"],
            "score": score,
            "event_id": event.id,
            "input_hash": context["input_hash"],
            "content_hash": context["content_hash"],
        }
        self.scored[artifact_id] = scored
        key = (context["session_id"], context["cycle"])
        self._scored_by_cycle.setdefault(key, []).append(scored)

    def _lock_event(self, event: StoredEvent) -> None:
        """A lock is an explicit preference: the locked lineage's latest scored output beats
        each competitor's output for the same cycle."""
        competitors = set(event.payload.get("competingLineageIds") or [])
        session_rows = (
            self.conn.execute(select(_scored).where(_scored.c.session_id == event.session_id))
            .mappings()
            .all()
        )
        rows = {r["artifact_id"]: dict(r) for r in session_rows}
        rows.update({k: v for k, v in self.scored.items() if v["session_id"] == event.session_id})
        mine = [r for r in rows.values() if r["lineage_id"] == event.lineage_id]
        if not mine:
            return
        winner = max(mine, key=lambda r: r["cycle"])
        for loser in rows.values():
            if loser["lineage_id"] not in competitors or loser["cycle"] != winner["cycle"]:
                continue
            if loser["content_hash"] == winner["content_hash"]:
                continue
            self._add(
                f"preference:lock:{event.id}:{loser['artifact_id']}",
                example_type="preference",
                source="lock",
                session_id=event.session_id,
                lineage_id=event.lineage_id,
                cycle=winner["cycle"],
                user_input_hash=winner["input_hash"],
                chosen_hash=winner["content_hash"],
                rejected_hash=loser["content_hash"],
                score=winner["score"],
                score_delta=None,  # preferred whatever the scores
                source_events=json.dumps(sorted([event.id, winner["event_id"], loser["event_id"]])),
                created_at=event.timestamp,
            )

    def _add(self, example_id: str, **row: Any) -> None:
        defaults = {
            "lineage_id": None,
            "system_prompt_hash": None,
            "completion_hash": None,
            "chosen_hash": None,
            "rejected_hash": None,
            "score": None,
            "score_delta": None,
        }
        self.examples[example_id] = {**defaults, **row, "id": example_id}

    def flush(self) -> int:
        """Rows in with executemany on the driver's cursor (a million-event rebuild writes
        hundreds of thousands; SQLAlchemy's per-row parameter work was a fifth of the run)."""
        added = _INSERT_EXAMPLES.run(self.conn, list(self.examples.values()))
        _INSERT_SCORED.run(self.conn, list(self.scored.values()))
        return added  # conflicts (already materialized) insert nothing


_INSERT_EXAMPLES = TableInsert(_examples)
_INSERT_SCORED = TableInsert(_scored)
