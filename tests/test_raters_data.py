"""Several raters in the training data (issue #63): reward rows keep every rater's score,
preference pairs come only from outputs the raters agree on, and `training-camp-data report`
measures inter-rater agreement. A single-rater session exports exactly as before."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from domain.settings import Settings
from domain.spec import SessionSpec
from store import Store
from store.exports.exporter import FORMATS, ExportFilters, export
from store.exports.materializer import Materializer
from store.tables import TrainingExampleRow
from tests.conftest import (
    awaiting,
    make_spec,
    start_without_search_attributes,
    training_data_app,
    wait_for_state,
)
from tests.test_training_signal import scored_session
from worker import build_worker

DATA = Path(__file__).parent / "data"
# every format's rows of the single-rater session (tests/test_training_signal.py), as written
# by the code before several raters reached the training data (commit 3e05022)
SINGLE_RATER_EXPORT = DATA / "single-rater-export-3e05022.json"


def exported(store: Store, out: Path) -> dict[str, Any]:
    """Every format's rows, per split, sorted (rows written in one millisecond may come in
    either order): JSONL lines as written, Parquet as its schema and its rows."""
    import pyarrow.parquet as pq

    found: dict[str, Any] = {}
    for name, fmt in FORMATS.items():
        result = export(store.engine, name, out, ExportFilters(eval_fraction=0.5))
        for split, path in result.files.items():
            if fmt.suffix == "jsonl":
                rows = sorted(Path(path).read_text(encoding="utf-8").splitlines())
                found[f"{name}.{split}"] = rows
            else:
                table = pq.read_table(path)
                rows = sorted(json.dumps(r, sort_keys=True) for r in table.to_pylist())
                found[f"{name}.{split}"] = {"schema": str(table.schema), "rows": rows}
    return found


async def test_a_single_rater_session_exports_exactly_as_before(
    client, store, settings, run_worker, tmp_path
):
    """Two single-rater lineages, three cycles, a lock: every format's files hold the same
    rows, byte for byte, as before several raters reached the training data."""
    spec = await scored_session(client, settings, run_worker, store=store)
    now = exported(store, tmp_path / "out")
    if os.environ.get("RECORD_SINGLE_RATER_EXPORT"):  # recorded once, on the old code
        SINGLE_RATER_EXPORT.write_text(json.dumps(now, indent=1, ensure_ascii=False) + "\n")
    assert now == json.loads(SINGLE_RATER_EXPORT.read_text())
    # and the report says plainly that one rater per output measures no agreement
    shown = report(store, spec.session_id, tmp_path / "report")
    assert "Inter-rater agreement: no output of this session was scored by two or more raters" in (
        " ".join(shown.split())
    )


# ---- several raters, through Temporal (the time-skipping server) -----------------------------

RATERS = {"raters": ["ana", "bo", "cy"], "quorum": 2, "scoreWindow": "2h"}
# per lineage, per cycle: each rater's score. A's raters agree in cycle 1 (3, 4, 5: a spread
# of 2) and not in cycle 2 (1, 9, 5); B's agree in both
PANEL_SCORES = {
    "A": [{"ana": 3, "bo": 4, "cy": 5}, {"ana": 1, "bo": 9, "cy": 5}],
    "B": [{"ana": 8, "bo": 9, "cy": 8}, {"ana": 7, "bo": 7, "cy": 8}],
}


@contextlib.asynccontextmanager
async def panel_session(
    env: WorkflowEnvironment, store: Store, settings: Settings, options: dict[str, Any]
) -> AsyncIterator[tuple[SessionSpec, dict[str, WorkflowHandle[Any, Any]]]]:
    """Lineages A and B (different prompts: different answers) with ``options``, started on
    ``env`` without search attributes, their worker running."""
    spec = make_spec(
        labels=("A", "B"), options=options, prompts={"B": "You are a friendly coach. Be warm."}
    )
    async with build_worker(env.client, store, settings):
        handles = {}
        for lineage in spec.lineages:
            handles[lineage.label] = await start_without_search_attributes(
                env.client, spec, lineage.label, settings.task_queue
            )
        yield spec, handles
        # every lineage stopped before any result is awaited: awaiting one lets the server skip
        # time, and a lineage left idle meanwhile would reach the test server's default
        # ten-year execution timeout and close before its `stop`
        for handle in handles.values():
            await handle.signal("stop")
        for handle in handles.values():
            await handle.result()


# what they ask of A's first output: ana and bo shorter, cy longer (in dispute)
PANEL_WANTS = {("A", 1): {"ana": ["shorter"], "bo": ["shorter"], "cy": ["longer"]}}


async def scored_by_panels(env, store, settings) -> SessionSpec:
    """Two cycles of A and B, each output scored by ana, bo and cy (PANEL_SCORES)."""
    async with panel_session(env, store, settings, RATERS) as (spec, handles):
        for cycle in (1, 2):
            for label, handle in handles.items():
                await wait_for_state(handle, awaiting(cycle))
                for rater, score in PANEL_SCORES[label][cycle - 1].items():
                    sent: dict[str, Any] = {"score": score, "rater": rater}
                    wants = PANEL_WANTS.get((label, cycle), {}).get(rater)
                    if wants:
                        sent["wants"] = wants
                    await handle.signal("score", sent)
        for handle in handles.values():
            await wait_for_state(handle, awaiting(3))
    return spec


def _examples(store: Store) -> list[dict[str, Any]]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(TrainingExampleRow.__table__)).mappings().all()
    return sorted((dict(r) for r in rows), key=lambda r: r["id"])


def _jsonl(out: Path, name: str) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for split in ("train", "eval")
        for line in (out / f"{name}.{split}.jsonl").read_text(encoding="utf-8").splitlines()
    ]


@pytest.mark.every_backend  # the pairs' SQL reads the evaluations' tags
async def test_reward_rows_keep_every_rater_and_pairs_only_agreed_outputs(
    time_skipping_env, store, settings, tmp_path
):
    """Every reward row of an output three raters scored carries each one's score beside the
    median; the outputs pair only where both sides' raters agree (a spread of 2 at most): A's
    cycle 2 (1, 9 and 5) pairs with nothing. An incremental run and a rebuild in windows of
    one event (a score's window apart from its raters' record) give the same rows."""
    spec = await scored_by_panels(time_skipping_env, store, settings)
    Materializer(store.engine).run()
    examples = _examples(store)
    rewards = sorted(
        (e["lineage_id"][-1], e["cycle"], e["score"])
        for e in examples
        if e["example_type"] == "reward"
    )
    assert rewards == [("A", 1, 4.0), ("A", 2, 5.0), ("B", 1, 8.0), ("B", 2, 7.0)]
    pairs = [e for e in examples if e["example_type"] == "preference"]
    assert [(p["cycle"], p["score"], p["score_delta"]) for p in pairs] == [(1, 8.0, 4.0)]
    Materializer(store.engine, batch_size=1).run(full=True)
    assert _examples(store) == examples

    scored = store.queries.events(None, ["artifact.scored"])
    tags = {(e.lineage_id[-1], e.payload["cycle"]): e.tags for e in scored}
    assert "raters_disagree" in tags[("A", 2)] and "raters_disagree" not in tags[("A", 1)]
    assert all("several_raters" in t for t in tags.values())

    out = tmp_path / "out"
    export(store.engine, "reward", out, ExportFilters(eval_fraction=0))
    rows = sorted(_jsonl(out, "reward"), key=lambda r: (r["reward"], r["ratings"][0]["score"]))
    assert [(r["reward"], r["ratings"]) for r in rows][:2] == [
        (4.0, [{"rater": "ana", "score": 3.0}, {"rater": "bo", "score": 4.0},
               {"rater": "cy", "score": 5.0}]),
        (5.0, [{"rater": "ana", "score": 1.0}, {"rater": "bo", "score": 9.0},
               {"rater": "cy", "score": 5.0}]),
    ]  # fmt: skip
    export(store.engine, "trl-dpo", out, ExportFilters(eval_fraction=0))
    (dpo,) = _jsonl(out, "trl-dpo")
    assert dpo["prompt"] == [{"role": "user", "content": spec.inputs[0]}]
    export(store.engine, "parquet-reward", out, ExportFilters(eval_fraction=0))
    import pyarrow.parquet as pq

    table = pq.read_table(out / "parquet-reward.train.parquet")
    assert table.schema.names == ["prompt", "completion", "reward", "checks", "ratings"]
    assert sorted(len(r) for r in table.column("ratings").to_pylist()) == [3, 3, 3, 3]


def report(store: Store, session_id: str, out: Path) -> str:
    """`training-camp-data report` as typed (in this process); what it printed."""
    url = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    shown = training_data_app("report", session_id, "--out", str(out), url=url)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return shown.stdout


async def test_the_report_gives_inter_rater_agreement_and_the_disputes(
    time_skipping_env, store, settings, tmp_path
):
    """Krippendorff's alpha (interval) over the four outputs three raters scored, as the
    maintained package computes it from the raters' scores, and the wish in dispute with who
    said what, printed and on the page."""
    import krippendorff

    spec = await scored_by_panels(time_skipping_env, store, settings)
    table = [
        [PANEL_SCORES[label][cycle][rater] for label in "AB" for cycle in (0, 1)]
        for rater in ("ana", "bo", "cy")
    ]
    alpha = krippendorff.alpha(reliability_data=table, level_of_measurement="interval")
    printed = " ".join(report(store, spec.session_id, tmp_path / "report").split())
    assert (
        f"Inter-rater agreement: Krippendorff's alpha (interval) {alpha:.2f} over 4 outputs "
        "scored by two or more raters (12 scores; raters: ana, bo, cy)."
    ) in printed
    assert "A cycle 1: longer / shorter (ana: shorter; bo: shorter; cy: longer)" in printed
    page = (tmp_path / "report" / "index.html").read_text()
    assert f"alpha (interval) {alpha:.2f}" in page
    assert "A cycle 1: longer / shorter (ana: shorter; bo: shorter; cy: longer)" in page


def test_alpha_is_not_given_when_no_score_varies():
    """Every rater gave every output the same score: they agree, and alpha (disagreement
    against the scores' variation) is undefined, said as such rather than a number."""
    from services.rater_agreement import _alpha

    assert _alpha([[5.0, 5.0], [5.0, 5.0]]) is None
    assert _alpha([[3.0, 1.0], [4.0, 9.0], [5.0, 5.0]]) == pytest.approx(-0.197, abs=1e-3)
