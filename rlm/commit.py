"""The commit protocol: a worker's findings as one mergeable unit.

``parse_commit`` reads a model's reply (fenced, or slightly malformed JSON) into a Commit, or a
Commit with ``error`` set. ``plan`` resolves every reference — local ids, global ids of the
parent's store, ``BATCH:parent`` — and namespaces new ids as ``batch_prefix/commit_id/local_id``;
it reports unknown references instead of dropping them. Stores apply a plan atomically.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from domain.content_hash import content_hash
from rlm.objects import SpanRef, StoreObject

BATCH_PARENT = "BATCH:parent"


class CommitCreate(BaseModel):
    type: str
    id: str = Field(min_length=1)  # local to the commit
    description: str
    content: dict[str, Any] = Field(default_factory=dict)
    backrefs: list[SpanRef] = Field(default_factory=list)
    parents: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class CommitLink(BaseModel):
    type: Literal["supports", "contradicts", "refines"]
    src: str
    dst: str
    description: str = ""


class ProposedUpdate(BaseModel):
    target_id: str
    patch: dict[str, Any] = Field(default_factory=dict)
    description_update: str | None = None


class Commit(BaseModel):
    commit_id: str = Field(min_length=1, pattern=r"^[^/\s]+$")
    creates: list[CommitCreate] = Field(default_factory=list)
    links: list[CommitLink] = Field(default_factory=list)
    proposes_updates: list[ProposedUpdate] = Field(default_factory=list)
    error: str | None = None

    def fingerprint(self) -> str:
        return content_hash(self.model_dump(mode="json"))


class CommitResult(BaseModel):
    commit_key: str
    applied: bool
    already_applied: bool = False
    created: list[str] = Field(default_factory=list)
    proposals: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class CommitPlan(BaseModel):
    key: str
    fingerprint: str
    objects: list[StoreObject]
    children: dict[str, list[str]]  # existing object id → new child ids
    proposals: list[tuple[str, ProposedUpdate]]


# ---- parsing a model's reply ------------------------------------------------------------


def _repairs(text: str) -> list[str]:
    """Candidate JSON texts, from the most to the least literal."""
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text
    start, end = body.find("{"), body.rfind("}")
    if start >= 0 and end > start:
        body = body[start : end + 1]
    candidates = [body]
    fixed = re.sub(r",\s*([}\]])", r"\1", body)  # trailing commas
    fixed = re.sub(r"\bTrue\b", "true", re.sub(r"\bFalse\b", "false", fixed))
    fixed = re.sub(r"\bNone\b", "null", fixed)
    candidates.append(fixed)
    if "'" in fixed and '"' not in fixed:
        candidates.append(fixed.replace("'", '"'))
    return candidates


def parse_commit(text: str, commit_id: str) -> Commit:
    """A Commit from a worker's reply; never raises — an unreadable reply is a Commit whose
    ``error`` says why (so the parent records the failure instead of losing it)."""
    problem = "no JSON object found"
    for candidate in _repairs(text):
        try:
            data = json.loads(candidate)
        except json.JSONDecodeError as exc:
            problem = f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if not isinstance(data, dict):
            problem = "the reply is not a JSON object"
            continue
        data.setdefault("commit_id", commit_id)
        try:
            return Commit.model_validate(data)
        except ValidationError as exc:
            fields = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            return Commit(commit_id=commit_id, error=f"invalid commit: {fields}")
    return Commit(commit_id=commit_id, error=f"unparseable reply: {problem}")


# ---- planning a merge -------------------------------------------------------------------


class CommitError(ValueError):
    """The commit cannot be applied; nothing was."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def plan(
    commit: Commit,
    batch_prefix: str,
    exists: Callable[[str], bool],
    batch_parent: str | None = None,
    worker: str | None = None,
) -> CommitPlan:
    """Resolve and namespace everything first, so applying is all or nothing."""
    if commit.error:
        raise CommitError([f"commit {commit.commit_id} carries an error: {commit.error}"])
    prefix = f"{batch_prefix}/{commit.commit_id}" if batch_prefix else commit.commit_id
    local = {c.id: f"{prefix}/{c.id}" for c in commit.creates}
    errors: list[str] = []
    if len(local) != len(commit.creates):
        errors.append("creates: local ids must be unique")

    def resolve(ref: str, where: str) -> str | None:
        if ref in local:
            return local[ref]
        if ref == BATCH_PARENT:
            if batch_parent is None:
                errors.append(f"{where}: {BATCH_PARENT} used but this batch has no parent")
                return None
            return batch_parent
        if exists(ref):
            return ref
        errors.append(f"{where}: unknown reference {ref!r}")
        return None

    objects: list[StoreObject] = []
    for i, create in enumerate(commit.creates):
        parents = [resolve(p, f"creates[{i}].parents") for p in create.parents]
        objects.append(
            StoreObject(
                id=local[create.id],
                type=create.type,
                description=create.description,
                content=create.content,
                backrefs=create.backrefs,
                parents=[p for p in parents if p],
                tags=create.tags,
                worker=worker,
                commit=prefix,
            )
        )
    objects += _link_objects(commit.links, resolve, prefix, worker)
    proposals = []
    for i, update in enumerate(commit.proposes_updates):
        target = resolve(update.target_id, f"proposes_updates[{i}].target_id")
        if target:
            proposals.append(
                (f"{prefix}/proposal{i}", update.model_copy(update={"target_id": target}))
            )
    if errors:
        raise CommitError(errors)
    return CommitPlan(
        key=prefix,
        fingerprint=commit.fingerprint(),
        objects=objects,
        children=_children(objects),
        proposals=proposals,
    )


Resolve = Callable[[str, str], str | None]  # (reference, where it stands) → global id


def _link_objects(
    links: list[CommitLink], resolve: Resolve, prefix: str, worker: str | None
) -> list[StoreObject]:
    """A link object for each link whose two ends resolve (an unresolved end is an error
    ``resolve`` has recorded), as a child of its source."""
    objects: list[StoreObject] = []
    for i, link in enumerate(links):
        src, dst = resolve(link.src, f"links[{i}].src"), resolve(link.dst, f"links[{i}].dst")
        if src and dst:
            objects.append(
                StoreObject(
                    id=f"{prefix}/link{i}",
                    type="link",
                    description=link.description or f"{src} {link.type} {dst}",
                    content={"type": link.type, "src": src, "dst": dst},
                    parents=[src],
                    tags=[link.type],
                    worker=worker,
                    commit=prefix,
                )
            )
    return objects


def _children(objects: list[StoreObject]) -> dict[str, list[str]]:
    """Existing object id → the ids of the new objects under it; a parent new in this commit
    has its new children listed on its own object instead."""
    new_ids = {o.id for o in objects}
    children: dict[str, list[str]] = {}
    for obj in objects:
        for parent in obj.parents:
            if parent in new_ids:
                next(o for o in objects if o.id == parent).children.append(obj.id)
            else:
                children.setdefault(parent, []).append(obj.id)
    return children
