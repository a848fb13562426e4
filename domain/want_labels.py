"""The human words for wants (``domain/want_labels.json``): "shorter: about half", "no table",
"back to v1". The review page's chips and picker, ``training-camp score``, ``read`` and
``correct`` and the README's list of families all say a want this way."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from domain import wants
from domain.answer_parts import part_words, unscoped

FILE = Path(__file__).with_name("want_labels.json")


@cache
def _labels() -> dict[str, dict[str, str]]:
    """Every family's words, checked against the families a want may name: one missing or
    left over is a broken install, said at once."""
    found: dict[str, dict[str, str]] = json.loads(FILE.read_text(encoding="utf-8"))["families"]
    missing = set(wants.families()) - set(found)
    extra = set(found) - set(wants.families())
    if missing or extra or not all(entry.get("label") for entry in found.values()):
        raise ValueError(
            f"{FILE.name}: every family needs a label (missing {sorted(missing)}, "
            f"unknown {sorted(extra)})"
        )
    return found


def family_label(family: str) -> str:
    """The words for a family asked for: ``cite_sources`` → "cite sources"."""
    return _labels()[family]["label"]


def label(want: str, undo_to: int | None = None) -> str:
    """The words for a want (ValueError for one that does not parse): ``shorter:half`` →
    "shorter: about half", ``remove:table`` → "no table", ``example:1`` → "one example",
    ``undo`` → "back to v1" when ``undo_to`` says which version that is, ``revert:v2`` →
    "back to v2", ``language:german@summary`` → "the closing summary in German",
    ``avoid:"to be fair"`` → "avoid 'to be fair'"."""
    aspect = wants.parse(want)
    family = aspect.want or ""
    if family == "banned":  # avoid:"…"
        return f"avoid {aspect.detail!r}"
    if family == "language":
        language, part = unscoped(aspect.detail)
        said = f"{part_words(part)} in {language}" if part else f"in {language}"
        return {"remove": f"no longer {said}", "keep": f"keep: {said}"}.get(
            aspect.action or "", said
        )
    entry = _labels()[family]
    if family == "undo":
        return f"back to v{undo_to}" if undo_to else entry["label"]
    if family == "revert":  # "revert:v2", "revert:start"
        return f"back to v{wants.version_of(aspect.detail)}"
    if aspect.action == "remove":
        return entry.get("none") or f"no {entry['label']}"
    said = entry["label"] if aspect.action == "add" else f"{aspect.action}: {entry['label']}"
    amount = aspect.amount
    if amount is None:
        return said
    if amount.kind == "count" and amount.unit == wants.UNITS.get(family) and aspect.action == "add":
        return amount.says()  # "one example", "three bullets": the unit names the family
    return f"{said}: {amount.says()}"


def glossary() -> list[tuple[str, str]]:
    """(family, its words) for every family a want may name, in the order wants lists them."""
    return [(family, family_label(family)) for family in wants.families()]


def help_line() -> str:
    """The families for a command's help: "bullets (bullet points), casual (casual tone)…"."""
    return ", ".join(
        family if family == words else f"{family} ({words})" for family, words in glossary()
    )
