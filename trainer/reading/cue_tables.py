"""Cue data, one loader for every language: the English reader's cues (``cues/en/``), the
other comment languages' phrase lists (``cues/<code>.json``) and every language's action words
(``cues/actions/<code>.json``).

Each file is read once and checked as it is read: a family ``domain/change_families.py`` does
not define, an aspect no family has, a regex that does not compile or two English cues of one
priority is an error naming the file and the cue (raised on first use, and by
``tests/test_change_families.py`` for every file), never a cue that silently never fires.

An English cue file holds the cues of one aspect. Each gives its regex (a list of alternatives),
the family it asks for (``ask``), the family it asks for when refused or described as the
problem (``fault``; a state's is the registry's opposite of ``ask``) and its ``priority``: of
two overlapping matches the longer wins, and of two as long the lower priority number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, Literal, cast

from domain.change_families import FAMILIES, opposite_of

CUE_DIR = Path(__file__).parent / "cues"
ENGLISH = CUE_DIR / "en"
ACTIONS = CUE_DIR / "actions"
Kind = Literal["state", "quality", "fault"]
KINDS = ("state", "quality", "fault")
ASPECTS = frozenset(f.aspect for f in FAMILIES.values())


class CueDataError(ValueError):
    """Cue data that cannot be used as it stands (the message names the file and the cue)."""


@dataclass(frozen=True)
class Cue:
    """Words that carry a wish (``ask``, ``fault``, ``priority``: see the module docstring)."""

    pattern: re.Pattern[str]
    aspect: str
    ask: str | None
    fault: str | None
    confidence: float = 0.85
    # "state": names a state of the answer (asked for unless framed otherwise)
    # "quality": an adjective; in a comment, bare, it describes the answer (a fault)
    # "fault": names a fault; refusing or describing it asks for the fix, denying it cancels
    kind: Kind = "state"
    # the family holds whatever the frame: "never invent" and "you invented" both ask for it
    fixed: bool = False
    # inferred from a complaint only ("a wall of text"): yields to an explicit wish
    weak: bool = False
    priority: int = 0
    # a state described as the problem asks for its fault only weakly: "paragraphs are painful"
    # says what is wrong, not which form would be right
    weak_when_described: bool = False
    # an adjective that may size a part of the answer rather than the answer: "a short closing
    # line" asks for nothing about the length
    sizes_parts: bool = False


# What a cue record may hold: the cue's own fields (its regex for its pattern; its file names
# its aspect), and a comment
FLAGS = ("confidence", "fixed", "weak", "weak_when_described", "sizes_parts")
CUE_KEYS = frozenset(("regex", "comment", "priority", "kind", "ask", "fault", *FLAGS))


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise CueDataError(f"{path}: cannot be read as JSON: {error}") from error
    if not isinstance(data, dict):
        raise CueDataError(f"{path}: a cue file holds one JSON object")
    return data


def check_family(name: object, path: Path, where: str) -> None:
    if name not in FAMILIES:
        raise CueDataError(
            f"{path}: {where}: {name!r} is no change family (domain/change_families.py)"
        )


def compile_regex(
    regex: object, path: Path, where: str, flags: int = re.I, parts: dict[str, str] | None = None
) -> re.Pattern[str]:
    """A regex given as one string or as a list of alternatives; ``{{name}}`` in it stands for
    ``parts[name]`` (a vocabulary file's fragments)."""
    if isinstance(regex, list) and regex and all(isinstance(r, str) for r in regex):
        regex = "|".join(regex)
    if not isinstance(regex, str) or not regex:
        raise CueDataError(f"{path}: {where}: regex must be a string or a list of strings")
    for name, text in (parts or {}).items():
        regex = regex.replace("{{" + name + "}}", text)
    try:
        return re.compile(regex, flags)
    except re.error as error:
        raise CueDataError(f"{path}: {where}: bad regex: {error}") from error


def _cue(record: dict[str, Any], aspect: str, path: Path) -> Cue:
    where = f"cue of priority {record.get('priority')}"
    unknown = set(record) - CUE_KEYS
    if unknown:
        raise CueDataError(f"{path}: {where}: unknown keys {sorted(unknown)}")
    if not isinstance(record.get("priority"), int):
        raise CueDataError(f"{path}: {where}: an integer priority is required")
    kind = record.get("kind", "state")
    if kind not in KINDS:
        raise CueDataError(f"{path}: {where}: kind {kind!r} is not one of {KINDS}")
    ask = record.get("ask")
    fault = opposite_of(ask) if kind == "state" and ask else record.get("fault")
    if kind == "state" and ask and "fault" in record:
        raise CueDataError(f"{path}: {where}: a state's fault is its family's opposite")
    for family in (ask, fault):
        if family is not None:
            check_family(family, path, where)
    pattern = compile_regex(record.get("regex"), path, where)
    flags = {name: type(getattr(Cue, name))(record[name]) for name in FLAGS if name in record}
    return Cue(
        pattern, aspect, ask, fault, kind=cast(Kind, kind), priority=record["priority"], **flags
    )


def cue_file(path: Path) -> list[Cue]:
    """The cues of one English cue file, checked."""
    data = read_json(path)
    aspect = data.get("aspect")
    if aspect not in ASPECTS:
        raise CueDataError(f"{path}: aspect {aspect!r} is no family's aspect")
    return [_cue(record, aspect, path) for record in data.get("cues", [])]


@lru_cache(maxsize=1)
def english_cues() -> tuple[Cue, ...]:
    """Every English cue, in priority order."""
    cues: list[Cue] = []
    seen: dict[int, Path] = {}
    for path in sorted(ENGLISH.glob("*.json")):
        for cue in cue_file(path):
            if cue.priority in seen:
                raise CueDataError(
                    f"{path}: priority {cue.priority} is also a cue's in {seen[cue.priority]}"
                )
            seen[cue.priority] = path
            cues.append(cue)
    return tuple(sorted(cues, key=lambda c: c.priority))


@dataclass(frozen=True)
class Vocabulary:
    """A file of the English reader's other vocabulary (``trainer/reading/cues/en/vocabulary/``):
    named patterns, plain tables (word lists, maps), and rewrites (a pattern and the plain
    text it stands for). A regex may hold ``{{name}}``, the file's fragment of that name."""

    patterns: dict[str, re.Pattern[str]]
    tables: dict[str, Any]
    rewrites: tuple[tuple[re.Pattern[str], str], ...]


@cache
def vocabulary(name: str) -> Vocabulary:
    """``trainer/reading/cues/en/vocabulary/<name>.json``, checked. Patterns match lowered text, so
    they are case-sensitive unless marked ``ignore_case``."""
    path = ENGLISH / "vocabulary" / f"{name}.json"
    data = read_json(path)
    fragments = {
        name: "|".join(text) if isinstance(text, list) else text
        for name, text in data.get("fragments", {}).items()
    }

    def compiled(entry: dict[str, Any], where: str) -> re.Pattern[str]:
        flags = re.I if entry.get("ignore_case") else 0
        return compile_regex(entry.get("regex"), path, where, flags, fragments)

    patterns = {k: compiled(v, k) for k, v in data.get("patterns", {}).items()}
    rewrites = tuple(
        (compiled(entry, f"rewrite {index}"), entry["plain"])
        for index, entry in enumerate(data.get("rewrites", []))
    )
    return Vocabulary(patterns, data.get("tables", {}), rewrites)


def phrases(
    words: list[str], bounded: bool = True, plural: list[str] | None = None
) -> re.Pattern[str] | None:
    """One pattern for a phrase list of a language's file (None for none): whole words unless
    the language writes none apart (``word_boundaries: false``); ``plural``: endings a
    phrase's last word may take (``["s"]``: "demasiado largas" for "demasiado larga")."""
    if not words:
        return None
    body = "|".join(re.escape(p) for p in sorted(words, key=len, reverse=True))
    ending = f"(?:{'|'.join(map(re.escape, plural))})?" if plural else ""
    return re.compile(rf"(?<!\w)(?:{body}){ending}(?!\w)" if bounded else f"(?:{body})", re.I)


@cache
def words() -> dict[str, re.Pattern[str]]:
    """Every named pattern of the English vocabulary files, by name: a name two files give is
    an error (the reader looks words up by their name alone)."""
    found: dict[str, re.Pattern[str]] = {}
    for path in sorted((ENGLISH / "vocabulary").glob("*.json")):
        for name, pattern in vocabulary(path.stem).patterns.items():
            if name in found:
                raise CueDataError(f"{path}: pattern {name!r} is named in another file too")
            found[name] = pattern
    return found


def _family_phrases(path: Path, key: str, default: object = None) -> dict[str, Any]:
    """A file whose ``key`` maps families to phrase lists, checked."""
    data = read_json(path)
    table = data.get(key, default)
    if not isinstance(table, dict):
        raise CueDataError(f"{path}: {key}: expected an object of family → phrases")
    for name, phrases in table.items():
        check_family(name, path, key)
        if not isinstance(phrases, list) or not all(isinstance(p, str) for p in phrases):
            raise CueDataError(f"{path}: {key}: {name}: expected a list of phrases")
    return data


def language_file(path: Path) -> dict[str, Any]:
    """A comment language's phrase file (``trainer/reading/cues/<code>.json``), checked."""
    return _family_phrases(path, "families")


def action_file(path: Path) -> dict[str, Any]:
    """A language's action words (``trainer/reading/cues/actions/<code>.json``), checked."""
    return _family_phrases(path, "nouns", {})


def check_all() -> int:
    """Load and check every cue file; the number of files."""
    english_cues()
    checks = ((ENGLISH / "vocabulary", lambda p: vocabulary(p.stem)), (CUE_DIR, language_file))
    paths = list(ENGLISH.glob("*.json"))
    for folder, check in (*checks, (ACTIONS, action_file)):
        for path in sorted(folder.glob("*.json")):
            check(path)
            paths.append(path)
    return len(paths)
