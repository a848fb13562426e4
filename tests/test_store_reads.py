"""Reads a worker makes on its own: the first read of a new process may be any of them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from domain.execution import SpanRecord

pytestmark = pytest.mark.every_backend

FIRST_READ = """
import json, sys
from store import Store
store = Store.open(sys.argv[1])
spans = store.queries.spans(sys.argv[2])
print(json.dumps([(s.id, s.output) for s in spans]))
"""


def test_a_new_process_can_read_spans_first(store, backend_url):
    # A worker restarted while a lineage awaits its score: the training's read of the cycle's
    # spans is the process's first read of the store.
    spans = [
        SpanRecord(span_id=f"s{i}", sequence=i, span_type="llm_call", name="draft", output=f"o{i}")
        for i in range(2)
    ]
    store.recorder.record_spans(session_id="s", lineage_id="s-A", attempt_id="a1", spans=spans)
    read = subprocess.run(
        [sys.executable, "-c", FIRST_READ, backend_url, "a1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout) == [["s0", "o0"], ["s1", "o1"]]
