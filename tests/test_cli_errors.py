"""An operator's mistake is one line and exit code 1, not a traceback: Temporal or the store out
of reach, a date that is not one (each command run as a process, as a user runs it)."""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests import forked
from tests.test_demo_command import free_port

ROOT = Path(__file__).parent.parent
SPEC = "examples/essay-session.yaml"
DATA = ("-m", "services.training_data")


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python *args``: a process of its own, forked from one that imported the app (it would
    spend seconds of CPU importing it itself; tests/forked.py)."""
    return forked.run(list(args), env={"PATH": os.environ["PATH"], "COLUMNS": "80", **env})


def cases(tmp_path: Path) -> list[tuple[tuple[str, ...], dict[str, str], list[str]]]:
    """(arguments, environment, what the line says) for each mistake."""
    nowhere = f"127.0.0.1:{free_port()}"  # nothing listens there
    sqlite = {"TRAINING_CAMP_DATABASE_URL": f"sqlite:///{tmp_path / 'camp.db'}"}
    down = {**sqlite, "TEMPORAL_ADDRESS": nowhere}
    no_db = f"postgresql://postgres@{nowhere}/postgres"
    (tmp_path / "a-directory").mkdir()
    not_a_file = f"sqlite:///{tmp_path / 'a-directory'}"  # SQLite cannot open it
    return [
        (("starter.py", "start", SPEC), down, ["cannot reach Temporal", nowhere]),
        (("starter.py", "status", SPEC), down, ["cannot reach Temporal", nowhere]),
        (("starter.py", "inbox"), down, ["cannot reach Temporal", nowhere]),
        (("starter.py", "output", "x", "--database-url", no_db), {}, ["cannot use the store"]),
        ((*DATA, "history", "x", "--database-url", no_db), {}, ["cannot use the store"]),
        ((*DATA, "verify", "--database-url", not_a_file), {}, ["cannot use the store"]),
        (
            (*DATA, "export", "trl-sft", "--out", str(tmp_path), "--since", "yesterday"),
            sqlite,
            ["--since 'yesterday' is not a date", "ISO 8601", "2026-11-01"],
        ),
        (
            (*DATA, "export", "trl-sft", "--out", str(tmp_path), "--until", "2026-13-45"),
            sqlite,
            ["--until '2026-13-45' is not a date", "month must be in 1..12", "ISO 8601"],
        ),
        (
            (*DATA, "as-of", "essay-demo-A", "--at", "not-a-date"),
            sqlite,
            ["--at 'not-a-date' is not a date", "ISO 8601"],
        ),
    ]


def test_operator_mistakes_are_one_line_and_exit_code_1(tmp_path):
    todo = cases(tmp_path)
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = list(pool.map(lambda case: run(*case[0], env=case[1]), todo))
    for (args, _, says), result in zip(todo, done, strict=True):
        shown = (result.stdout + result.stderr).strip()
        assert result.returncode == 1, (args, shown[-2000:])
        assert len(shown.splitlines()) == 1, (args, shown[-2000:])
        for words in says:
            assert words in shown, (args, shown)


def test_the_dates_accepted():
    from services.training_data import _ms

    assert _ms("2026-11-01", "--since") == 1_793_491_200_000  # UTC unless told
    assert _ms("2026-11-01T14:30", "--since") == 1_793_543_400_000
    assert _ms("2026-11-01T14:30+01:00", "--since") == 1_793_539_800_000
    assert _ms(None, "--since") is None
