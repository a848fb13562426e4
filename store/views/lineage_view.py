"""Reads of the lineage view: sessions, their documents and lineages, and each lineage's agent
versions (the definitions themselves cached, since a version never changes)."""

from __future__ import annotations

from collections import OrderedDict

from sqlalchemy import Engine, bindparam
from sqlmodel import col, select

from domain.agent import AgentDefinition, AgentRef
from store.tables import AgentVersionRow, LineageRow, SessionDocumentRow
from store.views.reader import ViewReader

CACHED_DEFINITIONS = 1024  # agent versions kept decoded (about 2 KB each)
_versions = AgentVersionRow.__table__  # type: ignore[attr-defined]
_DEFINITION_HASH = select(_versions.c.definition_hash).where(_versions.c.id == bindparam("id"))


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

    def session_lineages(self, session_id: str) -> list[LineageRow]:
        return self._all(
            select(LineageRow).where(LineageRow.session_id == session_id).order_by(LineageRow.label)
        )
