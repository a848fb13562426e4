"""The findings store in the database: durable, one per ``store_id``, the same API and commit
protocol as the in-memory one (``rlm.store``)."""

from __future__ import annotations

import json
from typing import Any

from rlm.commit import CommitPlan
from rlm.objects import Proposal, StoreObject
from rlm.store import FindingsStore
from store.backends.database import write_transaction
from store.backends.dialect import insert_ignore
from store.tables import RlmCommitRow, RlmObjectRow, RlmProposalRow


class DatabaseFindingsStore(FindingsStore):
    """The same store, durable: rows keyed by ``store_id`` in the application database.
    Reads go to ``read_engine`` when given (a Store's read-only engine: on SQLite a reader
    then never takes the write lock), writes to ``engine``."""

    def __init__(self, engine: Any, store_id: str, read_engine: Any = None) -> None:
        self.engine, self.store_id = engine, store_id
        self.read_engine = read_engine or engine
        self._objects_t = RlmObjectRow.__table__  # type: ignore[attr-defined]
        self._commits_t = RlmCommitRow.__table__  # type: ignore[attr-defined]
        self._proposals_t = RlmProposalRow.__table__  # type: ignore[attr-defined]

    @staticmethod
    def _to_object(row: Any) -> StoreObject:
        return object_from_row(row)

    def get(self, object_id: str) -> StoreObject | None:
        from sqlalchemy import select

        t = self._objects_t
        with self.read_engine.connect() as conn:
            row = (
                conn.execute(select(t).where(t.c.store_id == self.store_id, t.c.id == object_id))
                .mappings()
                .first()
            )
        return self._to_object(row) if row else None

    def objects(self) -> list[StoreObject]:
        from sqlalchemy import select

        t = self._objects_t
        with self.read_engine.connect() as conn:
            rows = (
                conn.execute(
                    select(t).where(t.c.store_id == self.store_id).order_by(t.c.position, t.c.id)
                )
                .mappings()
                .all()
            )
        return [self._to_object(r) for r in rows]

    def _fingerprint(self, key: str) -> str | None:
        from sqlalchemy import select

        t = self._commits_t
        with self.read_engine.connect() as conn:
            return conn.execute(
                select(t.c.fingerprint).where(t.c.store_id == self.store_id, t.c.key == key)
            ).scalar()

    def _apply(self, commit_plan: CommitPlan) -> bool:
        from sqlalchemy import func, select, update

        t = self._objects_t
        with write_transaction(self.engine) as conn:
            won = conn.execute(
                insert_ignore(conn, self._commits_t, ["store_id", "key"]).returning(
                    self._commits_t.c.key
                ),
                [
                    {
                        "store_id": self.store_id,
                        "key": commit_plan.key,
                        "fingerprint": commit_plan.fingerprint,
                    }
                ],
            ).first()
            if won is None:
                return False  # another writer applied this commit first
            start = conn.execute(
                select(func.coalesce(func.max(t.c.position), 0)).where(
                    t.c.store_id == self.store_id
                )
            ).scalar_one()
            if commit_plan.objects:
                conn.execute(
                    t.insert(),
                    [
                        object_to_row(self.store_id, o, start + i + 1)
                        for i, o in enumerate(commit_plan.objects)
                    ],
                )
            for parent, kids in commit_plan.children.items():
                current = conn.execute(
                    select(t.c.children)
                    .where(t.c.store_id == self.store_id, t.c.id == parent)
                    .with_for_update()
                ).scalar_one()
                conn.execute(
                    update(t)
                    .where(t.c.store_id == self.store_id, t.c.id == parent)
                    .values(children=json.dumps([*json.loads(current), *kids]))
                )
            if commit_plan.proposals:
                conn.execute(
                    self._proposals_t.insert(),
                    [
                        {
                            "store_id": self.store_id,
                            "id": pid,
                            "target_id": u.target_id,
                            "patch": json.dumps(u.patch),
                            "description_update": u.description_update,
                            "status": "pending",
                        }
                        for pid, u in commit_plan.proposals
                    ],
                )
        return True

    def proposals(self, status: str | None = None) -> list[Proposal]:
        from sqlalchemy import select

        t = self._proposals_t
        query = select(t).where(t.c.store_id == self.store_id).order_by(t.c.id)
        if status:
            query = query.where(t.c.status == status)
        with self.read_engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            Proposal(
                id=r["id"],
                target_id=r["target_id"],
                patch=json.loads(r["patch"]),
                description_update=r["description_update"],
                status=r["status"],
                reason=r["reason"],
            )
            for r in rows
        ]

    def _resolve(self, proposal: Proposal, updated: StoreObject | None) -> None:
        from sqlalchemy import update

        p, t = self._proposals_t, self._objects_t
        with write_transaction(self.engine) as conn:
            changed = conn.execute(
                update(p)
                .where(
                    p.c.store_id == self.store_id, p.c.id == proposal.id, p.c.status == "pending"
                )
                .values(status=proposal.status, reason=proposal.reason)
            ).rowcount
            if changed != 1:
                raise ValueError(f"proposal {proposal.id} was resolved meanwhile")
            if updated is not None:
                conn.execute(
                    update(t)
                    .where(t.c.store_id == self.store_id, t.c.id == updated.id)
                    .values(content=json.dumps(updated.content), description=updated.description)
                )


def object_to_row(
    store_id: str, obj: StoreObject, position: int, **overrides: Any
) -> dict[str, Any]:
    """A findings object as its table row (the isolated and the shared stores share the table)."""
    return {
        "store_id": store_id,
        "id": obj.id,
        "type": obj.type,
        "description": obj.description,
        "content": json.dumps(obj.content),
        "backrefs": json.dumps([b.model_dump() for b in obj.backrefs]),
        "parents": json.dumps(obj.parents),
        "children": json.dumps(obj.children),
        "tags": json.dumps(obj.tags),
        "worker": obj.worker,
        "commit_key": obj.commit,
        "invalidated": obj.invalidated,
        "position": position,
        **overrides,
    }


def object_from_row(row: Any) -> StoreObject:
    """An ``rlm_objects`` row (isolated stores and shared views alike) as a StoreObject."""
    return StoreObject(
        id=row["id"],
        type=row["type"],
        description=row["description"],
        content=json.loads(row["content"]),
        backrefs=json.loads(row["backrefs"]),
        parents=json.loads(row["parents"]),
        children=json.loads(row["children"]),
        tags=json.loads(row["tags"]),
        worker=row["worker"],
        commit=row["commit_key"],
        invalidated=row["invalidated"],
    )
