"""The reader reads every comment the project holds exactly as the snapshot recorded
(``tests/reading_snapshot.py``): a change to how cues are kept or matched changes no reading.
A deliberate change of reading regenerates the snapshot in the same commit, and says so."""

from __future__ import annotations

import json

import pytest

from tests import reading_snapshot

MAX_SHOWN = 5
# the texts are read in shards, so that the test processes share the reading (a minute in one)
SHARDS = 6


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_text_reads_as_recorded(shard: int) -> None:
    recorded = json.loads(reading_snapshot.SNAPSHOT.read_text(encoding="utf-8"))
    present = reading_snapshot.sources()
    differing: list[str] = []
    checked = set()
    for source, texts in present.items():
        for text in texts:
            key = reading_snapshot.key(text)
            if key not in recorded or key in checked:
                continue
            checked.add(key)
            if int(key, 16) % SHARDS != shard:
                continue  # another shard reads it
            expected = recorded[key]
            actual = reading_snapshot.entry(expected["source"], text)
            if actual != expected:
                differing.append(f"{source}: {text!r}\n  was {expected}\n  now {actual}")
    assert not differing, f"{len(differing)} texts read differently:\n" + "\n".join(
        differing[:MAX_SHOWN]
    )
    # every recorded text of a source still here was found (a test's literals may change)
    lost = [
        k
        for k, v in recorded.items()
        if k not in checked and v["source"] in present and not v["source"].startswith("tests/")
    ]
    assert not lost, f"{len(lost)} recorded texts no longer found"
