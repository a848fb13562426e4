"""Every human judgement becomes training data: materialized examples, exports that load with
`datasets`, upcast old events, projections rebuilt row for row, time travel, a report."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from client import start_session
from store.eventstore import event_log
from store.exports.exporter import FORMATS, ExportFilters, export, split_of
from store.exports.materializer import Materializer
from store.tables import ExportRow, PayloadBlob, TrainingExampleRow
from store.views.time_travel import as_of, history, rebuild_and_verify
from tests.conftest import awaiting, eventually, make_spec, training_data_app, wait_for_state

SCORES = {"A": [3, 9, 6], "B": [8, 5, 6]}  # per cycle: B wins 1, A wins 2, a tie in 3


async def scored_session(client, settings, run_worker, store=None):
    spec = make_spec(labels=("A", "B"), prompts={"B": "You are a friendly coach. Be warm."})
    async with run_worker():
        handles = dict(
            zip("AB", await start_session(client, spec, settings.task_queue), strict=True)
        )
        for cycle in (1, 2, 3):
            for label, handle in handles.items():
                await wait_for_state(handle, awaiting(cycle))
                await handle.signal(
                    "score",
                    {
                        "score": SCORES[label][cycle - 1],
                        "comment": "way too long" if SCORES[label][cycle - 1] < 8 else "good",
                    },
                )
        for handle in handles.values():
            await wait_for_state(handle, awaiting(4))
        if store is not None:  # lock A, and wait until the lock is in the store
            await handles["A"].signal("lock", {"reason": "the better one"})
            await eventually(lambda: store.queries.lineage(spec.lineage_id("A")).locked)
    return spec


def _examples(store) -> list[dict]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(TrainingExampleRow.__table__)).mappings().all()
    return sorted((dict(r) for r in rows), key=lambda r: r["id"])


def _load(path: str, kind: str, tmp: Path):
    os.environ["HF_DATASETS_OFFLINE"] = os.environ["HF_HUB_OFFLINE"] = "1"
    import datasets

    return datasets.load_dataset(
        kind, data_files=path, split="train", cache_dir=str(tmp / "hf-cache")
    )


async def test_two_lineages_three_cycles_become_training_data(
    client, store, settings, run_worker, tmp_path
):
    spec = await scored_session(client, settings, run_worker)
    result = Materializer(store.engine).run()
    examples = _examples(store)
    by_type = {
        t: [e for e in examples if e["example_type"] == t] for t in ("sft", "preference", "reward")
    }
    assert len(by_type["reward"]) == 6
    assert sorted(e["score"] for e in by_type["sft"]) == [8, 9]
    pairs = sorted((e["cycle"], e["score"], e["score_delta"]) for e in by_type["preference"])
    assert pairs == [(1, 8, 5), (2, 9, 4)]  # the tie in cycle 3 is no preference
    assert result.examples_added == 10
    compared = store.queries.events(None, ["artifact.compared"])
    mine = [e for e in compared if e.session_id == spec.session_id]
    assert [e.payload["cycle"] for e in mine] == [1, 2, 3]
    assert all("comparison" in e.tags for e in mine)
    assert Materializer(store.engine).run().examples_added == 0  # exactly once

    counts = {}
    for name, fmt in FORMATS.items():
        out = export(store.engine, name, tmp_path / "out", ExportFilters(eval_fraction=0.5))
        counts[name] = out.counts
        loaded = 0
        for split, path in out.files.items():
            if out.counts[split]:
                data = _load(path, "json" if fmt.suffix == "jsonl" else "parquet", tmp_path)
                loaded += len(data)
                for row in data:
                    fmt.check(row)  # the format's rules, on what datasets read back
        assert loaded == out.counts["train"] + out.counts["eval"]
    assert sum(counts["trl-sft"].values()) == 2 and sum(counts["trl-dpo"].values()) == 2
    assert sum(counts["reward"].values()) == 6
    assert counts["parquet-dpo"] == counts["trl-dpo"] == counts["openai-preference"]

    dpo = [
        json.loads(line)
        for line in (tmp_path / "out" / "trl-dpo.train.jsonl").read_text().splitlines()
    ] + [
        json.loads(line)
        for line in (tmp_path / "out" / "trl-dpo.eval.jsonl").read_text().splitlines()
    ]
    assert all(r["prompt"] == [{"role": "user", "content": spec.inputs[0]}] for r in dpo)
    assert all(r["chosen"][0]["role"] == "assistant" != r["rejected"][0]["content"] for r in dpo)
    sft = json.loads(
        (tmp_path / "out")
        .joinpath(f"trl-sft.{split_of(by_type['sft'][0]['user_input_hash'], 0.5)}.jsonl")
        .read_text()
        .splitlines()[0]
    )
    assert [m["role"] for m in sft["messages"]] == ["system", "user", "assistant"]

    filtered = export(
        store.engine,
        "trl-sft",
        tmp_path / "f",
        ExportFilters(min_score=9, lineage_id=spec.lineage_id("A"), eval_fraction=0),
    )
    assert filtered.counts == {"train": 1, "eval": 0}
    with store.engine.connect() as conn:
        recorded = conn.execute(select(ExportRow.__table__)).mappings().all()
    assert len(recorded) == len(FORMATS) + 1
    last = [r for r in recorded if r["export_type"] == "trl-sft"][-1]
    assert json.loads(last["query_params"])["min_score"] == 9
    assert last["example_count"] == 1 and last["event_range_end"] > 0


async def test_incremental_equals_full_and_locks_are_preferences(
    client, store, settings, run_worker
):
    spec = await scored_session(client, settings, run_worker, store=store)
    materializer = Materializer(store.engine, batch_size=3)  # many small batches
    materializer.run()
    incremental = _examples(store)
    materializer.run(full=True)
    assert _examples(store) == incremental
    locks = [e for e in incremental if e["source"] == "lock"]
    assert len(locks) == 1 and locks[0]["lineage_id"] == spec.lineage_id("A")
    assert locks[0]["cycle"] == 3 and locks[0]["score_delta"] is None

    references, blobs = 0, store.queries.blob_stats()[0]
    for event in store.queries.events():
        references += 1 + sum(1 for k in event.payload if k.endswith("Hash"))
    ratio = blobs / references
    print(
        f"payload deduplication: {references} references, {blobs} blobs stored (ratio {ratio:.2f})"
    )
    assert ratio < 0.8


async def test_a_schema_v1_event_is_read_through_its_upcaster(client, store, settings, run_worker):
    spec = make_spec()
    async with run_worker():
        (handle,) = await start_session(client, spec, settings.task_queue)
        await wait_for_state(handle, awaiting(1))
    artifact = f"{spec.lineage_id('A')}:c1:artifact"
    with store.engine.begin() as conn:  # what the seed's recorder wrote
        event_log.append(
            conn,
            [
                event_log.NewEvent(
                    id="seed-v1-score",
                    event_type="artifact.scored",
                    schema_version=1,
                    payload={"score": 9, "comment": "from the old app", "artifactContent": "…"},
                    timestamp=1_700_000_000_000,
                    session_id=spec.session_id,
                    lineage_id=spec.lineage_id("A"),
                    artifact_id=artifact,
                    tags=["high_score"],
                )
            ],
        )
    (event,) = store.queries.events(spec.lineage_id("A"), ["artifact.scored"])
    assert event.schema_version == 2
    assert event.payload == {
        "evaluationId": f"{artifact}:evaluation:seed-v1-score",
        "rolloutId": f"{artifact[:-9]}",
        "cycle": 1,
        "agentVersion": None,
        "score": 9,
        "comment": "from the old app",
        "rater": None,
    }
    assert rebuild_and_verify(store.engine).events_replayed > 0
    (evaluation,) = store.queries.evaluations(spec.lineage_id("A"))
    assert (evaluation.score, evaluation.cycle, evaluation.agent_version) == (9, 1, None)
    Materializer(store.engine).run()
    assert {e["example_type"] for e in _examples(store)} == {"sft", "reward"}


async def test_rebuild_time_travel_and_report(client, store, settings, run_worker, tmp_path):
    spec = await scored_session(client, settings, run_worker)
    report = rebuild_and_verify(store.engine)
    assert report.identical
    # 2 lineages x 4 cycles run, and a revision of each output that failed a check of what
    # its reviewer asked for ("way too long": shorter than the output it was said of)
    revisions = [
        e for e in store.queries.events(None, ["output.checked"]) if e.payload["revision"] > 0
    ]
    assert report.tables["attempts"][0] == 8 + len(revisions)
    assert report.tables["evolution_records"][0] >= 2

    lineage = spec.lineage_id("A")
    events = history(store.engine, lineage)
    first_evolution = next(e for e in events if e.event_type == "agent.evolved")
    before = as_of(store.engine, lineage, position=first_evolution.position - 1)
    after = as_of(store.engine, lineage, position=first_evolution.position)
    now = as_of(store.engine, lineage)
    assert (before.version, after.version) == (1, 2)
    assert [s.score for s in before.scores] == [3]
    assert [s.score for s in now.scores] == [3, 9, 6] and now.version == 3
    assert before.definition.system_prompt != after.definition.system_prompt
    at_time = as_of(store.engine, lineage, at_ms=first_evolution.timestamp - 1)
    assert at_time.version == 1

    url = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        # the commands as typed, through the app in this process: tests/test_cli_walk.py runs
        # the command as a process of its own
        return training_data_app(*args, url=url)

    shown = cli("rebuild")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "evolution_records" in shown.stdout and "NO" not in shown.stdout
    shown = cli("as-of", lineage, "--position", str(first_evolution.position - 1))
    assert shown.returncode == 0 and ": v1" in shown.stdout
    assert "cycle 1: 3" in shown.stdout
    shown = cli("history", lineage)
    assert "agent.evolved" in shown.stdout and "artifact.scored" in shown.stdout
    # the workflow id, as Temporal shows it, names the same lineage
    assert cli("history", f"lineage-{lineage}").stdout == shown.stdout
    unknown = cli("history", "no-such-lineage")
    assert unknown.returncode == 1 and "no lineage 'no-such-lineage'" in unknown.stdout
    shown = cli("report", spec.session_id, "--out", str(tmp_path / "report"))
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (tmp_path / "report" / "scores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (tmp_path / "report" / "index.html").read_text()
    assert page.count("<tr><td>A</td>") == 3 and "way too long" in page
    shown = cli("export", "trl-dpo", "--out", str(tmp_path / "x"), "--min-score-delta", "5")
    assert shown.returncode == 0 and "1 rows" in shown.stdout.replace(",", "")
    assert cli("export", "csv").returncode == 2


@pytest.mark.parametrize("fmt", ["trl-sft", "trl-dpo", "openai-preference", "reward"])
def test_format_rules_refuse_bad_rows(fmt):
    from store.exports.exporter import FormatError

    bad = {
        "trl-sft": {"messages": [{"role": "user", "content": "q"}]},
        "trl-dpo": {
            "prompt": [{"role": "user", "content": "q"}],
            "chosen": [{"role": "assistant", "content": "a"}],
            "rejected": [{"role": "assistant", "content": "a"}],
        },
        "openai-preference": {
            "input": {"messages": [{"role": "assistant", "content": "q"}]},
            "preferred_output": [{"role": "assistant", "content": "a"}],
            "non_preferred_output": [{"role": "assistant", "content": "b"}],
        },
        "reward": {
            "prompt": [{"role": "user", "content": "q"}],
            "completion": [{"role": "assistant", "content": "a"}],
            "reward": 11,
        },
    }[fmt]
    with pytest.raises(FormatError):
        FORMATS[fmt].check(bad)


def test_split_is_deterministic_by_input():
    hashes = [f"{i:064x}" for i in range(2000)]
    splits = [split_of(h, 0.1) for h in hashes]
    assert splits == [split_of(h, 0.1) for h in hashes]
    assert 0.07 < splits.count("eval") / len(splits) < 0.13
    assert PayloadBlob  # the blob table backs every exported text
