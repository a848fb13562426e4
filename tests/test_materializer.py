"""Training data from the log, on every backend: SFT examples, preference pairs and rewards
materialized the same however the log is read, and every export format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from store import Store
from store.eventstore import event_log
from store.tables import (
    TrainingExampleRow,
)
from tests.store_story import (
    register,
    scored_cycle,
)

pytestmark = pytest.mark.every_backend


def _index_names(store: Store, table: str) -> set[str]:
    from sqlalchemy import inspect

    return {ix["name"] for ix in inspect(store.engine).get_indexes(table)}


def test_examples_are_the_same_however_the_log_is_materialized(store: Store):
    """One cycle, five lineages: two pairs of identical answers, one answer to another input, a
    second score of an output stored in the seed's schema, a score of an output not on record,
    and a lock. Materializing after every write, a rebuild one position at a time and a rebuild
    in one go give the same rows, and they are the ones the rules ask for."""
    from store.exports.materializer import Materializer

    ih = register(store, "s1-A")
    for lineage in ("s1-B", "s1-C", "s1-D", "s1-E"):
        register(store, lineage)
    artifact = {label: f"s1-{label}:c1:artifact" for label in "ABCDEZ"}

    def seed_score() -> None:  # A scored again, as the seed's recorder wrote scores (v1)
        with store.engine.begin() as conn:
            event_log.append(
                conn,
                [
                    event_log.NewEvent(
                        id="seed-v1",
                        event_type="artifact.scored",
                        schema_version=1,
                        payload={"score": 10, "comment": "even better"},
                        timestamp=1_700_000_000_000,
                        session_id="s1",
                        lineage_id="s1-A",
                        artifact_id=artifact["A"],
                    )
                ],
            )

    writes = [
        lambda: scored_cycle(store, "s1-A", ih[0], "- three crisp bullets", 9),
        lambda: scored_cycle(store, "s1-B", ih[0], "a rambling essay", 3),
        lambda: scored_cycle(store, "s1-C", ih[0], "- three crisp bullets", 7),  # = A's
        lambda: scored_cycle(store, "s1-D", ih[0], "a rambling essay", 5),  # = B's
        lambda: scored_cycle(store, "s1-E", ih[1], "an answer to another question", 1),
        seed_score,
        lambda: store.recorder.record_score(
            session_id="s1",
            lineage_id="s1-Z",
            evaluation_id="s1-Z:c1:e",
            artifact_id=artifact["Z"],  # no such output
            rollout_id="s1-Z:c1",
            cycle=1,
            agent_version=1,
            score=10,
            comment=None,
            rater="ana",
            outcome=None,
        ),
        lambda: store.recorder.record_lock(
            session_id="s1",
            lineage_id="s1-A",
            event_key="lock-1",
            cycle=1,
            locked=True,
            reason="the crisp one",
        ),
    ]
    materializer = Materializer(store.engine)
    for write in writes:
        write()
        materializer.run()
    incremental = _example_rows(store)
    Materializer(store.engine, batch_size=1).run(full=True)
    assert _example_rows(store) == incremental
    Materializer(store.engine).run(full=True)
    assert _example_rows(store) == incremental

    by_id = {row["id"]: row for row in incremental}
    assert sorted(r["score"] for r in incremental if r["example_type"] == "reward") == [
        1,
        3,
        5,
        7,
        9,
        10,
    ]
    assert by_id[f"reward:{artifact['A']}:evaluation:seed-v1"]["score"] == 10  # upcast
    assert sorted(r["score"] for r in incremental if r["example_type"] == "sft") == [9, 10]
    pairs = {
        r["id"].removeprefix("preference:"): (r["score"], r["score_delta"])
        for r in incremental
        if r["source"] == "comparison"
    }
    # Identical answers and answers to another input make no pair; the later score of A (10)
    # finds its pairs already made by its first (9).
    assert pairs == {
        f"{artifact['A']}>{artifact['B']}": (9, 6),
        f"{artifact['C']}>{artifact['B']}": (7, 4),
        f"{artifact['A']}>{artifact['D']}": (9, 4),
        f"{artifact['C']}>{artifact['D']}": (7, 2),
    }
    locks = [r for r in incremental if r["source"] == "lock"]
    # B's and D's answer (one text), not C's (A's own) nor E's (to another input):
    assert sorted(r["id"].split(":")[3] for r in locks) == ["s1-B", "s1-D"]
    assert {r["rejected_hash"] for r in locks} == {by_id["reward:s1-B:c1:e"]["completion_hash"]}
    assert {(r["score"], r["score_delta"]) for r in locks} == {(9, None)}
    assert not any("s1-Z" in r["id"] for r in incremental)  # no output, nothing to learn


def _example_rows(store: Store) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(TrainingExampleRow.__table__)).mappings().all()
    return sorted((dict(r) for r in rows), key=lambda r: r["id"])


def test_training_data_materializes_and_exports(store: Store, tmp_path: Path):
    """Two lineages scored on the same cycle: reward rows for both, an SFT example for the high
    score, a preference pair; running again adds nothing, a full rebuild the same rows."""
    from store.exports.exporter import export
    from store.exports.materializer import Materializer

    ih = register(store, "s1-A")[0]
    register(store, "s1-B")
    scored_cycle(store, "s1-A", ih, "- three crisp bullets", 9)
    scored_cycle(store, "s1-B", ih, "a rambling essay", 3)
    first = Materializer(store.engine).run()
    assert first.examples_added == 4  # 2 reward rows, 1 SFT example, 1 preference pair
    assert Materializer(store.engine).run().examples_added == 0
    assert Materializer(store.engine).run(full=True).examples_added == 4
    # A rebuild drops the examples' secondary indexes while it writes and builds them again;
    # a run after an interrupted rebuild (indexes gone) puts them back.
    names = {ix.name for ix in TrainingExampleRow.__table__.indexes}
    assert names and names <= _index_names(store, "mv_training_examples")
    with store.engine.begin() as conn:
        for index in TrainingExampleRow.__table__.indexes:
            index.drop(conn)
    assert Materializer(store.engine).run().examples_added == 0
    assert names <= _index_names(store, "mv_training_examples")
    dpo = export(store.engine, "trl-dpo", tmp_path)
    assert dpo.counts["train"] + dpo.counts["eval"] == 1
    [path] = [p for p in tmp_path.glob("trl-dpo.*.jsonl") if p.stat().st_size]
    row = path.read_text()
    assert "three crisp bullets" in row and "a rambling essay" in row


def test_every_format_writes_the_rows_it_checks(store: Store, tmp_path: Path):
    """Each export file holds exactly the format's rows: JSON lines equal json.dumps of the row
    (built from the stored texts without encoding them again), Parquet rows read back equal, and
    filters and splits pick the same examples for every format. Texts carry quotes, newlines,
    backslashes and non-ASCII, which the stored JSON must carry through unchanged."""

    import pyarrow.parquet as pq

    from store.exports.exporter import FORMATS, ExportFilters, _examples, export
    from store.exports.materializer import Materializer

    ih = register(store, "s1-A")[0]
    register(store, "s1-B")
    scored_cycle(store, "s1-A", ih, 'Bullets:\n- "crisp" \\ café ✓\n- naïve', 9)
    scored_cycle(store, "s1-B", ih, "a rambling essay\twith a tab", 3)
    Materializer(store.engine).run()
    filters = ExportFilters(eval_fraction=0.5)
    for name, fmt in FORMATS.items():
        expected = [fmt.row(e) for e in _examples(store.engine, fmt.example_type, filters)]
        assert expected, name
        result = export(store.engine, name, tmp_path / name, filters)
        written = []
        for path in result.files.values():
            if fmt.suffix == "jsonl":
                lines = Path(path).read_text(encoding="utf-8").splitlines()
                written += lines
            else:
                written += pq.read_table(path).to_pylist()
        if fmt.suffix == "jsonl":
            assert sorted(written) == sorted(json.dumps(r, ensure_ascii=False) for r in expected)
            assert all(json.loads(line) in expected for line in written)
        else:
            key = lambda r: json.dumps(r, sort_keys=True)  # noqa: E731
            assert sorted(map(key, written)) == sorted(map(key, expected))
        assert sum(result.counts.values()) == len(expected)
    [sft] = [json.loads(x) for p in (tmp_path / "trl-sft").glob("*.jsonl") for x in p.open()]
    assert sft["messages"][-1]["content"] == 'Bullets:\n- "crisp" \\ café ✓\n- naïve'


def test_corrections_export_as_their_own_jsonl_file(store: Store, tmp_path: Path):
    """``export corrections``: one row per labelled example, in the order they were made,
    filtered like the other formats, recorded in the exports table."""
    from store.exports.exporter import ExportFilters, export
    from store.tables import ExportRow
    from tests.store_story import correction_story

    first, second = correction_story(store)
    result = export(store.engine, "corrections", tmp_path / "all")
    assert result.counts == {"corrections": 2}
    path = Path(result.files["corrections"])
    assert path.name == "corrections.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [r["correction"] for r in rows] == [first, second]
    assert {k: v for k, v in rows[1].items() if k != "created_at"} == {
        "comment": "make it less stiff",
        "read_as": ["formal"],
        "corrected": ["casual", "example:1"],
        "rater": "bo",
        "session": "s2",
        "lineage": "s2-A",
        "evaluation": "e9",
        "cycle": 1,
        "correction": second,
    }
    only_s1 = export(store.engine, "corrections", tmp_path / "s1", ExportFilters(session_id="s1"))
    lines = Path(only_s1.files["corrections"]).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["session"] for line in lines] == ["s1"]
    with store.engine.connect() as conn:
        recorded = conn.execute(select(ExportRow.__table__)).mappings().all()
    assert sorted((r["export_type"], r["example_count"]) for r in recorded) == [
        ("corrections", 1),
        ("corrections", 2),
    ]
