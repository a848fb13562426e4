"""Hostile cells through the real runner, in the bubblewrap sandbox: what escaped the in-process
guard alone (a changed directory, a rename, sqlite, native process creation, the guard switched
off, database sockets, a detached child, results of any size) reaches nothing outside the
cell's directory and comes back bounded."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import psutil
import pytest

from rlm import sandbox
from rlm.sandbox import CellLimits, CellOutcome, SandboxUnavailable, run_cell

pytestmark = pytest.mark.skipif(
    sandbox.bubblewrap_available() is not None,
    reason=f"bubblewrap cannot run here: {sandbox.bubblewrap_available()}",
)

ROOT = Path(__file__).resolve().parent.parent
# Switches the in-process guard off, as a cell found it could: what follows is held by the
# OS sandbox alone
GUARD_OFF = (
    "import gc\n"
    "for o in gc.get_objects():\n"
    "    if type(o).__name__ == 'Guard':\n"
    "        o._check = lambda *a: None\n"
)


def cell(code: str, tmp_path: Path, **limits: Any) -> CellOutcome:
    return run_cell(
        code,
        workdir=tmp_path / "cell",
        handle=lambda method, args, kwargs: None,
        store_methods=["create"],
        context=None,
        snapshot=None,
        memo=[],
        can_recurse=False,
        limits=CellLimits(timeout_seconds=limits.pop("timeout", 5), memory_mb=512, **limits),
    )


def test_a_changed_directory_reaches_nothing_outside(tmp_path: Path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the worker's file")
    outcome = cell(f"import os\nos.chdir('/')\nprint(open('{str(secret)[1:]}').read())", tmp_path)
    assert outcome.error is not None and "the worker's file" not in outcome.stdout
    outcome = cell(GUARD_OFF + f"print(open({str(secret)!r}).read())", tmp_path)
    assert outcome.error is not None and "FileNotFoundError" in outcome.error
    outcome = cell(
        GUARD_OFF + "import os\nos.chdir('/')\nopen('escaped', 'w').write('x')", tmp_path
    )
    assert outcome.error is not None
    assert not Path("/escaped").exists()


def test_a_rename_out_of_the_directory_is_refused(tmp_path: Path):
    target = tmp_path / "renamed-out"
    code = f"import os\nopen('a', 'w').write('x')\nos.rename('a', {str(target)!r})"
    outcome = cell(code, tmp_path)
    assert outcome.error is not None and "outside its directory" in outcome.error
    outcome = cell(GUARD_OFF + code, tmp_path)
    assert outcome.error is not None and not target.exists()


def test_sqlite_cannot_open_a_store_outside(tmp_path: Path):
    other = tmp_path / "other-store.db"
    with sqlite3.connect(other) as db:
        db.execute("create table scores (score int)")
        db.execute("insert into scores values (3)")
    code = (
        f"import sqlite3\nc = sqlite3.connect({str(other)!r})\n"
        "c.execute('update scores set score = 10'); c.commit()"
    )
    outcome = cell(code, tmp_path)
    assert outcome.error is not None and "refuses databases outside" in outcome.error
    cell(GUARD_OFF + code, tmp_path)
    with sqlite3.connect(other) as db:
        assert db.execute("select score from scores").fetchall() == [(3,)]


def test_processes_started_past_the_guard_see_only_the_sandbox(tmp_path: Path):
    code = GUARD_OFF + (
        "import _posixsubprocess, os\n"
        "r, w = os.pipe()\n"
        "er, ew = os.pipe()\n"
        "args = [b'/bin/sh', b'-c', b'id -u; ls /; ls -a PROJECT; ls /var/run/postgresql 2>&1;'\n"
        "        b' echo done']\n"
        "pid = _posixsubprocess.fork_exec(args, [b'/bin/sh'], True, (w, ew), None, None,\n"
        "    -1, -1, -1, w, -1, w, er, ew, True, False, -1, None, None, -1, -1, None, False)\n"
        "os.close(w); os.close(ew); os.waitpid(pid, 0)\n"
        "print(os.read(r, 10000).decode())\n"
    )
    outcome = cell(code.replace("PROJECT", str(ROOT)), tmp_path)
    listing = outcome.stdout
    assert "done" in listing, outcome.error
    seen = listing.split()
    assert seen[0] == "65534"  # not root, not the worker's user
    assert "etc" not in seen and "var" not in seen
    # of the project, only the runtime and the cell's program: no store, no settings, no code
    assert {"store", "README.md", ".training-camp", "workflows"}.isdisjoint(seen)
    assert "No such file" in listing  # no PostgreSQL socket to reach


def test_a_detached_child_dies_with_the_cell(tmp_path: Path):
    code = GUARD_OFF + (
        "import _posixsubprocess, os\n"
        "er, ew = os.pipe()\n"
        "args = [b'/bin/sleep', b'313']\n"
        "_posixsubprocess.fork_exec(args, [b'/bin/sleep'], True, (ew,), None, None,\n"
        "    -1, -1, -1, 1, -1, 1, er, ew, True, True, -1, None, None, -1, -1, None, False)\n"
        "print('started')\n"
    )
    outcome = cell(code, tmp_path)
    assert "started" in outcome.stdout, outcome.error
    sleepers = [
        p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[-1:] == ["313"]
    ]
    # killed with the cell's PID namespace, a child may still be on its way out ('disk-sleep')
    # as the cell returns: it must be gone within moments, where a survivor sleeps 313 s
    _, alive = psutil.wait_procs(sleepers, timeout=5)
    assert alive == []


@pytest.mark.parametrize(
    ("code", "check"),
    [
        ("print('x' * 30_000_000)", "stdout"),
        ("FINAL_VAR('y' * 3_000_000)", "final"),
        ("raise ValueError('z' * 3_000_000)", "error"),
        ("blob = bytes(20 * 2**20)", "snapshot"),
    ],
)
def test_every_result_is_bounded(code: str, check: str, tmp_path: Path):
    outcome = cell(code, tmp_path, timeout=20)
    assert len(outcome.stdout) <= sandbox.MAX_STDOUT_CHARS + sandbox.BOUND_NOTE_CHARS
    assert len(outcome.error or "") <= sandbox.MAX_ERROR_CHARS + sandbox.BOUND_NOTE_CHARS
    assert len(json.dumps(outcome.final)) <= sandbox.MAX_FINAL_BYTES
    assert len(outcome.snapshot or "") * 3 // 4 <= sandbox.MAX_SNAPSHOT_BYTES
    if check == "stdout":
        assert outcome.stdout.endswith("more characters]")
    elif check == "final":
        assert not outcome.final_set and "ResultTooLarge" in (outcome.error or "")
    elif check == "error":
        assert (outcome.error or "").startswith(
            "ValueError"
        ) and "more characters]" in outcome.error
    else:
        assert outcome.dropped and "over the" in outcome.dropped[0]


def test_without_namespaces_cells_do_not_run_unless_the_weaker_mode_is_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(sandbox, "bubblewrap_available", lambda: "the kernel refused it")
    with pytest.raises(SandboxUnavailable, match="TRAINING_CAMP_RLM_ISOLATION=audit-hook-only"):
        cell("print(1)", tmp_path)
    weak = run_cell(
        "print(1)",
        workdir=tmp_path / "weak",
        handle=lambda *a: None,
        store_methods=[],
        context=None,
        snapshot=None,
        memo=[],
        can_recurse=False,
        limits=CellLimits(),
        isolation="audit-hook-only",
    )
    assert weak.stdout == "1\n"
