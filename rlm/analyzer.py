"""The rules-based RLM worker: evidence from a context, a summary, and links to the parent's
hypotheses (cards). Deterministic: the same task always yields the same commit."""

from __future__ import annotations

import re

from rlm.commit import Commit, CommitCreate, CommitLink
from rlm.objects import Card, SpanRef

_WORD = re.compile(r"[a-z][a-z-]{3,}")
_NEGATION = re.compile(r"\b(not|no|never|fails?|failed|without|cannot|worse)\b", re.IGNORECASE)
_STOP = {
    "this",
    "that",
    "with",
    "from",
    "have",
    "been",
    "were",
    "about",
    "into",
    "which",
    "their",
    "there",
    "what",
    "when",
}


def keywords(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def analyze(task_id: str, prompt: str, context: str, source_id: str, cards: list[Card]) -> Commit:
    wanted = keywords(prompt)
    creates: list[CommitCreate] = []
    for match in re.finditer(r"[^.!?\n]+[.!?]?", context):
        sentence = match.group(0).strip()
        if not sentence or not (keywords(sentence) & wanted):
            continue
        creates.append(
            CommitCreate(
                type="evidence",
                id=f"e{len(creates) + 1}",
                description=sentence[:300],
                content={"quote": sentence},
                backrefs=[SpanRef(source_id=source_id, start=match.start(), end=match.end())],
                tags=["evidence", f"source:{source_id}"],
            )
        )
    evidence = list(creates)
    creates.append(
        CommitCreate(
            type="summary",
            id="summary",
            description=f"{len(evidence)} passage(s) of {source_id} bear on: {prompt[:120]}",
            content={"evidence": len(evidence)},
            parents=[e.id for e in evidence],
            tags=["summary", f"source:{source_id}"],
        )
    )
    links = []
    for e in evidence:
        for card in cards:
            if card.type != "hypothesis" or not keywords(card.description) & keywords(
                e.description
            ):
                continue
            kind = "contradicts" if _NEGATION.search(e.description) else "supports"
            links.append(CommitLink(type=kind, src=e.id, dst=card.id))
    return Commit(commit_id=f"w-{task_id}", creates=creates, links=links)
