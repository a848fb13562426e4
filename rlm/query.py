"""The query language: ``type=evidence tag=doc:42 parent=abc desc~"rent"`` (all must hold)."""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel

from rlm.objects import StoreObject

KEYS = ("type", "tag", "parent", "id", "worker", "source")


class QueryError(ValueError):
    """A query that cannot be run; the message says which part and why."""


class Query(BaseModel):
    equals: dict[str, list[str]] = {}
    desc_contains: list[str] = []

    def matches(self, obj: StoreObject) -> bool:
        for key, values in self.equals.items():
            for value in values:
                if key == "type" and obj.type != value:
                    return False
                if key == "tag" and value not in obj.tags:
                    return False
                if key == "parent" and value not in obj.parents:
                    return False
                if key == "id" and obj.id != value:
                    return False
                if key == "worker" and obj.worker != value:
                    return False
                if key == "source" and all(b.source_id != value for b in obj.backrefs):
                    return False
        lowered = obj.description.lower()
        return all(text.lower() in lowered for text in self.desc_contains)


_TOKEN = re.compile(r"^(?P<key>[a-z_]+)(?P<op>=|~)(?P<value>.*)$", re.DOTALL)


def parse_query(text: str | None) -> Query:
    """Parse a query; unknown keys and malformed terms are errors, never ignored."""
    if not text or not text.strip():
        return Query()
    try:
        terms = shlex.split(text)
    except ValueError as exc:
        raise QueryError(f"cannot read {text!r}: {exc}") from None
    equals: dict[str, list[str]] = {}
    contains: list[str] = []
    for term in terms:
        match = _TOKEN.match(term)
        if not match:
            raise QueryError(f"{term!r} is not key=value or desc~text")
        key, op, value = match["key"], match["op"], match["value"]
        if key == "desc" and op == "~":
            contains.append(value)
        elif key in KEYS and op == "=":
            equals.setdefault(key, []).append(value)
        elif key in KEYS or key == "desc":
            raise QueryError(f"{key} takes {'~' if key == 'desc' else '='}, not {op}")
        else:
            raise QueryError(f"unknown key {key!r}; use {', '.join(KEYS)} or desc~")
    return Query(equals=equals, desc_contains=contains)
