"""Cue data is checked as it is loaded: every file in ``trainer/reading/cues`` names only registered
families, and a mistake in one is an error naming the file and the cue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.reading import cue_tables
from trainer.reading.cue_tables import CueDataError


def test_every_cue_file_loads_against_the_registry() -> None:
    assert cue_tables.check_all() >= len(list(cue_tables.CUE_DIR.glob("*.json")))
    priorities = [c.priority for c in cue_tables.english_cues()]
    assert priorities == sorted(set(priorities))


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "cues.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _english(tmp_path: Path, **cue: object) -> Path:
    record = {"priority": 7, "ask": "bullets", "regex": [r"\bbullets?\b"], **cue}
    return _write(tmp_path, {"language": "English", "aspect": "format", "cues": [record]})


def test_an_english_cue_file_reads_as_cues(tmp_path: Path) -> None:
    (cue,) = cue_tables.cue_file(_english(tmp_path, regex=[r"\bbullets?\b", r"\blisted\b"]))
    assert (cue.aspect, cue.ask, cue.fault, cue.priority) == ("format", "bullets", "prose", 7)
    assert cue.pattern.search("Use Bullets") and cue.pattern.search("listed")


@pytest.mark.parametrize(
    ("cue", "complaint"),
    [
        ({"ask": "bulletz"}, "'bulletz' is no change family"),
        ({"kind": "fault", "ask": None, "fault": "shortr"}, "'shortr' is no change family"),
        ({"regex": [r"\b(?:bullets"]}, "bad regex"),
        ({"priority": "first"}, "an integer priority is required"),
        ({"kind": "adjective"}, "kind 'adjective'"),
        ({"colour": "red"}, "unknown keys ['colour']"),
    ],
)
def test_a_mistake_names_the_file_and_the_cue(
    tmp_path: Path, cue: dict[str, object], complaint: str
) -> None:
    path = _english(tmp_path, **cue)
    with pytest.raises(CueDataError, match=r"cues\.json") as error:
        cue_tables.cue_file(path)
    assert complaint in str(error.value)


def test_another_languages_unknown_family_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, {"language": "Klingon", "families": {"shorter": ["x"], "terse": ["y"]}})
    with pytest.raises(CueDataError, match=r"cues\.json: families: 'terse' is no change family"):
        cue_tables.language_file(path)
    path = _write(tmp_path, {"language": "Klingon", "nouns": {"tabel": ["tabel"]}})
    with pytest.raises(CueDataError, match="nouns: 'tabel'"):
        cue_tables.action_file(path)
