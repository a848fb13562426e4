"""The feedback reader's readings of every comment the project holds, as canonical JSON: a
refactor of the reader (its cues moved to data, its engine reorganised) must read each of them
exactly as before. ``python -m tests.reading_snapshot`` writes
``tests/data/reading_snapshot.json`` from the current reader (with ``--time``, it times reading
them all instead); ``tests/test_reading_snapshot.py`` reads everything again and compares.

Texts are stored by hash, not verbatim: the development cases in ``../shared/feedback-dev`` are
not to be copied into the repository, and the other sources are in it already.
"""

from __future__ import annotations

import ast
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from domain.change_families import FAMILIES
from trainer.reading import reader as feedback_reader

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "data" / "reading_snapshot.json"
SHARED = ROOT.parent / "shared" / "feedback-dev"
# Test modules whose string literals are comments or instructions written for the reader
TEST_MODULES = (
    "test_wish_reading.py",
    "test_wishes.py",
    "test_feedback_reader_precision.py",
    "test_trainer_rules.py",
    "test_trainer_cases.py",
    "test_comment_languages.py",
    "test_change_families.py",
)
MIN_LITERAL_WORDS = 2
MAX_LITERAL_CHARS = 600


def _comments(path: Path) -> Iterator[str]:
    """The comments of a case file (``comment``) or a sequence file (``steps[].comment``)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "comment" in record:
            yield record["comment"]
        for step in record.get("steps", []):
            yield step["comment"]


def _literals(path: Path) -> Iterator[str]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and len(node.value.split()) >= MIN_LITERAL_WORDS
            and len(node.value) <= MAX_LITERAL_CHARS
        ):
            yield node.value


def sources() -> dict[str, list[str]]:
    """Source name → its texts (a missing source, such as the shared cases, is left out)."""
    found: dict[str, list[str]] = {}
    for name in ("cases.jsonl", "sequences.jsonl"):
        if (SHARED / name).exists():
            found[f"shared/{name}"] = list(_comments(SHARED / name))
    for path in sorted((ROOT / "bench" / "data").glob("*.jsonl")):
        found[f"bench/data/{path.name}"] = list(_comments(path))
    found["tests/data/feedback_paraphrases.jsonl"] = list(
        _comments(ROOT / "tests" / "data" / "feedback_paraphrases.jsonl")
    )
    for module in TEST_MODULES:
        found[f"tests/{module}"] = list(_literals(ROOT / "tests" / module))
    found["registry"] = [t for f in FAMILIES.values() for t in (f.instruction, f.firmer) if t]
    return found


def key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def _plain(value: Any) -> Any:
    """A reading as JSON, empty fields left out."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "__dataclass_fields__"):
        fields = {name: _plain(getattr(value, name)) for name in value.__dataclass_fields__}
        return {k: v for k, v in fields.items() if v not in (None, [], False)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def reading_of(text: str) -> dict[str, Any]:
    return {
        "comment": _plain(feedback_reader.read(text)),
        "instruction": _plain(feedback_reader.read(text, "instruction")),
        "asks": feedback_reader.asks(text),
    }


def entry(source: str, text: str) -> dict[str, Any]:
    """The snapshot's record of a text: its readings, or for a shared case (whose words the
    readings quote) only their digest."""
    readings = reading_of(text)
    if source.startswith("shared/"):
        canonical = json.dumps(readings, sort_keys=True)
        return {"source": source, "digest": hashlib.sha256(canonical.encode()).hexdigest()[:20]}
    return {"source": source, **readings}


def snapshot() -> dict[str, dict[str, Any]]:
    """Hash of each text → its source and readings."""
    readings: dict[str, dict[str, Any]] = {}
    for source, texts in sources().items():
        for text in texts:
            if key(text) not in readings:
                readings[key(text)] = entry(source, text)
    return readings


def timing(rounds: int = 3) -> float:
    """Seconds to read every text (both modes and ``asks``), the best of ``rounds``."""
    texts = list(dict.fromkeys(t for ts in sources().values() for t in ts))
    reading_of(texts[0])  # the language detector and cue tables loaded outside the timing
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for text in texts:
            reading_of(text)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    if "--time" in sys.argv:
        print(f"{timing():.2f} s to read every text")
        return
    readings = snapshot()
    # one text a line: a change of reading shows as a change of its line
    lines = ",\n".join(
        f"{json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in readings.items()
    )
    SNAPSHOT.write_text("{\n" + lines + "\n}\n", encoding="utf-8")
    print(f"{len(readings)} texts → {SNAPSHOT.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
