"""Reads of the lineage view: sessions, their documents and lineages, and each lineage's agent
versions (the definitions themselves cached, since a version never changes)."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import TypeVar

from sqlalchemy import Engine, bindparam, text
from sqlmodel import col, select

from domain.agent import AgentDefinition, AgentRef
from domain.checks import ActiveWish
from domain.events import Event, InputsSet, LineageBranched, WishesStanding
from store.tables import AgentVersionRow, LineageRow, SessionDocumentRow, SessionRow
from store.views.reader import ViewReader

CACHED_DEFINITIONS = 1024  # agent versions kept decoded (about 2 KB each)
_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]
_DEFINITION_HASH = select(_versions.c.definition_hash).where(_versions.c.id == bindparam("id"))
# A lineage's events of one type, oldest first (the log is indexed by lineage and by type):
# the few records no projection holds, a branch's origin, inputs, standing wishes
_OF_LINEAGE = text(
    "SELECT p.content FROM training_events e JOIN payload_blobs p ON p.hash = e.payload_hash"
    " WHERE e.lineage_id = :lineage AND e.event_type = :type ORDER BY e.position"
)
E = TypeVar("E", bound=Event)


class LineageView(ViewReader):
    """Sessions, lineages, agent versions."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        # bounded: a worker with thousands of waiting lineages reads each one's agent once a
        # cycle, and would otherwise keep every version it ever read
        self._definitions: OrderedDict[tuple[str, int], AgentDefinition] = OrderedDict()

    def agent_definition(self, ref: AgentRef) -> AgentDefinition:
        """An agent version (immutable once written, so the latest read are cached)."""
        key = (ref.agent_id, ref.version)
        with self._lock:
            cached = self._definitions.get(key)
            if cached is not None:
                self._definitions.move_to_end(key)
        if cached is not None:
            return cached.model_copy(deep=True)
        with self.engine.connect() as conn:
            digest = conn.execute(
                _DEFINITION_HASH, {"id": f"{ref.agent_id}@{ref.version}"}
            ).scalar_one_or_none()
        if digest is None:
            raise KeyError(f"agent {ref.agent_id} version {ref.version} is not in the store")
        definition = AgentDefinition.model_validate(self.payload(digest))
        with self._lock:
            self._definitions[key] = definition
            while len(self._definitions) > CACHED_DEFINITIONS:
                self._definitions.popitem(last=False)
        return definition.model_copy(deep=True)

    def agent_versions(self, lineage_id: str) -> list[AgentVersionRow]:
        return self._all(
            select(AgentVersionRow)
            .where(AgentVersionRow.lineage_id == lineage_id)
            .order_by(col(AgentVersionRow.version))
        )

    def session_documents(self, session_id: str) -> dict[str, str]:
        """name → text of the session's documents (the latest content per name)."""
        rows = self._all(
            select(SessionDocumentRow)
            .where(SessionDocumentRow.session_id == session_id)
            .order_by(col(SessionDocumentRow.created_at))
        )
        latest = {row.name: row.content_hash for row in rows}
        return {name: str(self.payload(digest)) for name, digest in latest.items()}

    def session(self, session_id: str) -> SessionRow | None:
        rows = self._all(select(SessionRow).where(SessionRow.id == session_id))
        return rows[0] if rows else None

    def lineage(self, lineage_id: str) -> LineageRow | None:
        rows = self._all(select(LineageRow).where(LineageRow.id == lineage_id))
        return rows[0] if rows else None

    def resolve_lineage(self, name: str) -> str:
        """The lineage named by its id (``essay-demo-A``) or its workflow id
        (``lineage-essay-demo-A``, what Temporal shows); KeyError when neither is known."""
        rows = self._all(
            select(LineageRow).where((LineageRow.id == name) | (LineageRow.workflow_id == name))
        )
        if not rows:
            raise KeyError(f"no lineage {name!r} in this store (by lineage or workflow id)")
        exact = [r for r in rows if r.id == name]
        return (exact or rows)[0].id

    def lineage_events(self, lineage_id: str, cls: type[E]) -> list[E]:
        """The lineage's events of one type, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(_OF_LINEAGE, {"lineage": lineage_id, "type": cls.event_type})
            return [cls.read(json.loads(content)) for (content,) in rows]

    def branch_origin(self, lineage_id: str) -> LineageBranched | None:
        """The version a lineage was branched from (None: it was not)."""
        found = self.lineage_events(lineage_id, LineageBranched)
        return found[0] if found else None

    def lineage_inputs(self, lineage_id: str) -> list[str]:
        """The lineage's cycle inputs in order, as last registered; KeyError when the store
        has none (a lineage registered before they were recorded)."""
        found = self.lineage_events(lineage_id, InputsSet)
        if not found:
            raise KeyError(f"the store holds no inputs of lineage {lineage_id!r}")
        return [str(self.payload(digest)) for digest in found[-1].input_hashes]

    def standing_wishes(self, lineage_id: str, version: int) -> tuple[list[ActiveWish], list[str]]:
        """The wishes the lineage's outputs were checked against on ``version``, and the
        families no change could take away, as the last step on that version left them
        (nothing for a version no step left wishes on: an original lineage's v1)."""
        return self.recorded_standing(lineage_id, version) or ([], [])

    def recorded_standing(
        self, lineage_id: str, version: int
    ) -> tuple[list[ActiveWish], list[str]] | None:
        """``standing_wishes``, or None when the log records none on ``version`` (a lineage
        written before they were recorded)."""
        found = [w for w in self.lineage_events(lineage_id, WishesStanding) if w.version == version]
        if not found:
            return None
        last = found[-1]
        wishes = [ActiveWish.model_validate(w.model_dump()) for w in last.wishes]
        return wishes, list(last.asked_for)

    def session_lineages(self, session_id: str) -> list[LineageRow]:
        return self._all(
            select(LineageRow).where(LineageRow.session_id == session_id).order_by(LineageRow.label)
        )
