"""Instructions per streamed span, ours against raw ``sqlite3`` doing the same writes, counted
by valgrind's callgrind: the same count on every run, whatever else the machine is doing, where
spans/s on a shared two-core VM moves by a third within the hour.

    .venv/bin/python -m bench.span_instructions [--spans 1500]

Each side runs in a child process under ``valgrind --tool=callgrind``, once writing no span and
once writing ``--spans`` spans one per transaction into a new store (WAL, synchronous=NORMAL);
the difference, divided by the spans, is the cost of one span: Python, SQLite and the system
calls' user-space side (not the kernel's work, nor the disk's). Takes two to three minutes.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.span_ingest import ours_one_at_a_time, raw_sqlite3
from store import Store


def child(side: str, n: int, db: Path) -> None:
    """What is counted: open a new store, then the span_ingest bench's own one-by-one loop."""
    store = Store.open(f"sqlite:///{db}")
    if side == "ours":
        ours_one_at_a_time(store, "a", n)
    else:
        raw_sqlite3(db, "a", n, size=1, synchronous="normal")
    store.close()


def count(side: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        command = [
            *("valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"),
            *(sys.executable, "-m", "bench.span_instructions"),
            *("--child", side, "--spans", str(n), "--db", str(Path(tmp) / "s.db")),
        ]
        # A fixed hash seed: dict and set layouts, and so the instruction count, repeat.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    found = re.search(r"Collected : ([\d,]+)", done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no total:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main(n: int) -> None:
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    per_span = {side: (count(side, n) - count(side, 0)) / n for side in ("ours", "raw")}
    ours, raw = per_span["ours"], per_span["raw"]
    print(f"instructions per span, one span per transaction ({n:,} spans, callgrind):")
    print(f"  ours:       {ours:,.0f}")
    print(f"  raw sqlite3 doing the same writes: {raw:,.0f} -> ours is {ours / raw:.2f}x raw")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spans", type=int, default=1500)
    parser.add_argument("--child", choices=("ours", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.spans, args.db)
    else:
        main(args.spans)
