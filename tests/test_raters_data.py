"""Several raters in the training data (issue #63): reward rows keep every rater's score,
preference pairs come only from outputs the raters agree on, and `training-camp-data report`
measures inter-rater agreement. A single-rater session exports exactly as before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from store import Store
from store.exports.exporter import FORMATS, ExportFilters, export
from tests.test_training_signal import scored_session

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
    await scored_session(client, settings, run_worker, store=store)
    now = exported(store, tmp_path / "out")
    if os.environ.get("RECORD_SINGLE_RATER_EXPORT"):  # recorded once, on the old code
        SINGLE_RATER_EXPORT.write_text(json.dumps(now, indent=1, ensure_ascii=False) + "\n")
    assert now == json.loads(SINGLE_RATER_EXPORT.read_text())
