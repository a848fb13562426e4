"""The REPL cell sandbox on its own: state kept between cells, limits, refusals, and the calls
a cell makes to the store and to the workflow."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlm.sandbox import CellLimits, CellOutcome, run_cell


class Store:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any], dict[str, Any]]] = []

    def __call__(self, method: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        self.calls.append((method, args, kwargs))
        if method == "create":
            return f"obj{len(self.calls)}"
        raise KeyError(f"no object {args[0]}")


def cell(
    code: str, tmp_path: Path, snapshot: str | None = None, **options: Any
) -> tuple[CellOutcome, Store]:
    store = Store()
    outcome = run_cell(
        code,
        workdir=tmp_path / "cell",
        handle=store,
        store_methods=["create", "get"],
        context=options.pop("context", {"n": 2}),
        snapshot=snapshot,
        memo=options.pop("memo", []),
        can_recurse=options.pop("can_recurse", True),
        limits=options.pop("limits", CellLimits(timeout_seconds=2, memory_mb=256)),
    )
    return outcome, store


def test_the_namespace_carries_values_functions_and_imports_to_the_next_cell(tmp_path: Path):
    first, _ = cell(
        "import re\nimport threading\nx = context['n'] * 21\n"
        "def shout(s):\n    return re.sub('a', 'A', s)\nlock = threading.Lock()",
        tmp_path,
    )
    assert first.error is None and first.dropped == ["lock"]  # named, so the model knows
    second, _ = cell("print(x, shout('banana'), 'lock' in globals())", tmp_path, first.snapshot)
    assert second.stdout == "42 bAnAnA False\n"


def test_store_calls_reach_the_host_and_its_refusals_reach_the_cell(tmp_path: Path):
    outcome, store = cell(
        "i = store.create('note', 'hi', tags=['x'])\nprint(i)\nstore.get('nope')", tmp_path
    )
    assert store.calls[0] == ("create", ["note", "hi"], {"tags": ["x"]})
    assert outcome.stdout == "obj1\n"
    assert outcome.error == "RuntimeError (line 3): KeyError: 'no object nope'"


def test_a_call_past_the_memo_suspends_the_cell_and_an_answer_resumes_it(tmp_path: Path):
    code = "a = llm_query('one')\nb = llm_query_batched(['two', 'three'])\nFINAL_VAR([a, b])"
    first, _ = cell(code, tmp_path)
    assert first.suspended == {"kind": "llm_query", "args": {"prompts": ["one"]}}
    second, _ = cell(code, tmp_path, memo=[["1"]])
    assert second.suspended == {"kind": "llm_query", "args": {"prompts": ["two", "three"]}}
    done, _ = cell(code, tmp_path, memo=[["1"], ["2", "3"]])
    assert done.final_set and done.final == ["1", ["2", "3"]]


def test_a_worker_at_max_depth_has_no_rlm_worker(tmp_path: Path):
    outcome, _ = cell("rlm_worker('go deeper')", tmp_path, can_recurse=False)
    assert outcome.error == "NameError (line 1): name 'rlm_worker' is not defined"


@pytest.mark.parametrize(
    ("code", "refusal"),
    [
        ("open('/etc/hostname').read()", "refuses reading outside its roots"),
        ("import subprocess\nsubprocess.run(['true'])", "refuses starting processes"),
        ("import os\nos.system('true')", "refuses starting processes"),
        ("import ctypes\nctypes.CDLL(None)", "refuses native code"),
        ("import os\nos.remove('/tmp/anything')", "refuses changing files outside"),
        ("import socket\nsocket.socket()", "refuses network access"),
    ],
)
def test_the_sandbox_refuses(code: str, refusal: str, tmp_path: Path):
    outcome, _ = cell(code, tmp_path)
    assert outcome.error is not None and refusal in outcome.error


def test_a_cell_writes_in_its_own_directory_and_sees_no_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-of-the-worker")
    outcome, _ = cell(
        "import os\nopen('notes.txt', 'w').write('kept')\nprint(open('notes.txt').read())\n"
        "print(os.getcwd() == os.environ['HOME'], sorted(os.environ))",
        tmp_path,
    )
    assert outcome.error is None
    # its directory is a tmpfs of the sandbox's own: nothing the cell writes lands on the host
    assert list((tmp_path / "cell").iterdir()) == []
    assert "sk-secret" not in outcome.stdout and "ANTHROPIC" not in outcome.stdout
    assert outcome.stdout.startswith("kept\nTrue")


def test_a_sleeping_cell_is_stopped_by_the_wall_clock(tmp_path: Path):
    outcome, _ = cell(
        "import time\nprint('before')\ntime.sleep(60)",
        tmp_path,
        limits=CellLimits(timeout_seconds=1),
    )
    assert outcome.error is not None and "ran past its 2 s limit" in outcome.error


def test_a_crashing_interpreter_is_reported_not_raised(tmp_path: Path):
    outcome, _ = cell("import os\nos.abort()", tmp_path)
    assert outcome.error is not None and "SIGABRT" in outcome.error
    assert os.path.isdir(tmp_path / "cell")
