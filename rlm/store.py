"""Isolated findings stores: one API, in memory (here; also inside workflow code: no I/O) or in
the database (``store.rlm_findings.findings``, durable). ``apply_commit`` is atomic, idempotent
and strict."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections import Counter
from typing import Any

from domain.content_hash import content_hash
from rlm.commit import Commit, CommitError, CommitPlan, CommitResult, ProposedUpdate, plan
from rlm.objects import Card, Proposal, SpanRef, StoreObject
from rlm.query import parse_query


class FindingsStore(ABC):
    # ---- what each backend provides ------------------------------------------------------

    @abstractmethod
    def get(self, object_id: str) -> StoreObject | None: ...

    @abstractmethod
    def objects(self) -> list[StoreObject]:
        """Every object, invalidated ones included, in creation order."""

    @abstractmethod
    def _fingerprint(self, key: str) -> str | None: ...

    @abstractmethod
    def _apply(self, commit_plan: CommitPlan) -> bool:
        """Atomically write the plan; False if the key was applied meanwhile."""

    @abstractmethod
    def proposals(self, status: str | None = None) -> list[Proposal]: ...

    @abstractmethod
    def _resolve(self, proposal: Proposal, updated: StoreObject | None) -> None: ...

    # ids outside this store that commits may refer to (the parent's cards)
    external: frozenset[str] = frozenset()

    def exists(self, object_id: str) -> bool:
        return object_id in self.external or self.get(object_id) is not None

    # ---- the API ---------------------------------------------------------------------------

    def create(
        self,
        type: str,
        description: str,
        content: dict[str, Any] | None = None,
        backrefs: list[SpanRef] | None = None,
        parents: list[str] | None = None,
        tags: list[str] | None = None,
        id: str | None = None,
    ) -> str:
        """Create one object with ``id`` (or the next ``obj<n>``); parents must exist."""
        object_id = id or f"obj{len(self.objects()) + 1}"
        if self.get(object_id) is not None:
            raise CommitError([f"object {object_id} already exists"])
        unknown = [p for p in parents or [] if self.get(p) is None]
        if unknown:
            raise CommitError([f"parents: unknown reference {p!r}" for p in unknown])
        obj = StoreObject(
            id=object_id,
            type=type,
            description=description,
            content=content or {},
            backrefs=backrefs or [],
            parents=parents or [],
            tags=tags or [],
        )
        created = CommitPlan(
            key=f"create:{object_id}",
            fingerprint=content_hash(obj.model_dump(mode="json")),
            objects=[obj],
            children={p: [object_id] for p in obj.parents},
            proposals=[],
        )
        if not self._apply(created):
            raise CommitError([f"object {object_id} already exists"])
        return object_id

    def view(self, query: str | None = None) -> list[StoreObject]:
        q = parse_query(query)
        return [o for o in self.objects() if o.invalidated is None and q.matches(o)]

    def card_view(self, query: str | None = None) -> list[Card]:
        return [o.card() for o in self.view(query)]

    def summary(self) -> dict[str, Any]:
        live = self.view()
        return {
            "objects": len(live),
            "by_type": dict(Counter(o.type for o in live)),
            "links": dict(Counter(o.content.get("type") for o in live if o.type == "link")),
            "pending_proposals": len(self.proposals("pending")),
        }

    def apply_commit(
        self,
        commit: Commit,
        batch_prefix: str = "",
        batch_parent: str | None = None,
        worker: str | None = None,
    ) -> CommitResult:
        key = f"{batch_prefix}/{commit.commit_id}" if batch_prefix else commit.commit_id
        seen = self._fingerprint(key)
        if seen is not None:
            if seen == commit.fingerprint():
                return CommitResult(commit_key=key, applied=False, already_applied=True)
            return CommitResult(
                commit_key=key,
                applied=False,
                errors=[f"commit {key} was already applied with different content"],
            )
        try:
            commit_plan = plan(commit, batch_prefix, self.exists, batch_parent, worker)
        except CommitError as exc:
            return CommitResult(commit_key=key, applied=False, errors=exc.errors)
        if not self._apply(commit_plan):
            return self.apply_commit(commit, batch_prefix, batch_parent, worker)
        return CommitResult(
            commit_key=key,
            applied=True,
            created=[o.id for o in commit_plan.objects],
            proposals=[pid for pid, _ in commit_plan.proposals],
        )

    def accept_proposal(self, proposal_id: str) -> StoreObject:
        proposal = self._pending(proposal_id)
        target = self.get(proposal.target_id)
        if target is None:
            raise KeyError(f"proposal {proposal_id} targets {proposal.target_id}, which is gone")
        updated = target.model_copy(
            update={
                "content": {**target.content, **proposal.patch},
                "description": proposal.description_update or target.description,
            }
        )
        self._resolve(proposal.model_copy(update={"status": "accepted"}), updated)
        return updated

    def reject_proposal(self, proposal_id: str, reason: str) -> None:
        proposal = self._pending(proposal_id)
        self._resolve(proposal.model_copy(update={"status": "rejected", "reason": reason}), None)

    def _pending(self, proposal_id: str) -> Proposal:
        found = [p for p in self.proposals() if p.id == proposal_id]
        if not found:
            raise KeyError(f"no proposal {proposal_id}")
        if found[0].status != "pending":
            raise ValueError(f"proposal {proposal_id} is already {found[0].status}")
        return found[0]

    def export_commit(self, commit_id: str, query: str | None = None) -> Commit:
        """This store's findings as one commit, for a parent to merge (ids kept as local ids,
        references between them kept; references outside become the batch parent)."""
        objects = self.view(query)
        ids = {o.id for o in objects}
        known = ids | self.external  # the parent resolves external ids as its own
        creates = [
            {
                "type": o.type,
                "id": o.id,
                "description": o.description,
                "content": o.content,
                "backrefs": [b.model_dump() for b in o.backrefs],
                "parents": [p for p in o.parents if p in known],
                "tags": o.tags,
            }
            for o in objects
            if o.type != "link"
        ]
        links = [
            {
                "type": o.content["type"],
                "src": o.content["src"],
                "dst": o.content["dst"],
                "description": o.description,
            }
            for o in objects
            if o.type == "link" and o.content.get("src") in known and o.content.get("dst") in known
        ]
        # Updates this store proposed to objects its parent owns travel on, still proposals.
        proposals = [
            {
                "target_id": p.target_id,
                "patch": p.patch,
                "description_update": p.description_update,
            }
            for p in self.proposals("pending")
            if p.target_id in known
        ]
        return Commit.model_validate(
            {
                "commit_id": commit_id,
                "creates": creates,
                "links": links,
                "proposes_updates": proposals,
            }
        )


class InMemoryFindingsStore(FindingsStore):
    """Thread-safe; deterministic, so workflow code can merge commits in one."""

    def __init__(self, external: set[str] | frozenset[str] = frozenset()) -> None:
        self.external = frozenset(external)
        self._lock = threading.RLock()
        self._objects: dict[str, StoreObject] = {}
        self._commits: dict[str, str] = {}
        self._proposals: dict[str, Proposal] = {}

    def get(self, object_id: str) -> StoreObject | None:
        with self._lock:
            found = self._objects.get(object_id)
            return found.model_copy(deep=True) if found else None

    def objects(self) -> list[StoreObject]:
        with self._lock:
            return [o.model_copy(deep=True) for o in self._objects.values()]

    def _fingerprint(self, key: str) -> str | None:
        with self._lock:
            return self._commits.get(key)

    def _apply(self, commit_plan: CommitPlan) -> bool:
        with self._lock:
            if commit_plan.key in self._commits:
                return False
            self._commits[commit_plan.key] = commit_plan.fingerprint
            for obj in commit_plan.objects:
                self._objects[obj.id] = obj.model_copy(deep=True)
            for parent, kids in commit_plan.children.items():
                if parent in self._objects:  # not for the parent's cards
                    self._objects[parent].children.extend(kids)
            for pid, update in commit_plan.proposals:
                self._proposals[pid] = new_proposal(pid, update)
            return True

    def proposals(self, status: str | None = None) -> list[Proposal]:
        with self._lock:
            return [p for p in self._proposals.values() if status in (None, p.status)]

    def _resolve(self, proposal: Proposal, updated: StoreObject | None) -> None:
        with self._lock:
            self._proposals[proposal.id] = proposal
            if updated is not None:
                self._objects[updated.id] = updated


def new_proposal(pid: str, update: ProposedUpdate) -> Proposal:
    return Proposal(
        id=pid,
        target_id=update.target_id,
        patch=update.patch,
        description_update=update.description_update,
    )
