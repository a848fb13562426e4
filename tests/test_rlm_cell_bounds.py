"""A cell takes only what it is given (issue 45), through the real bubblewrap sandbox: RAM it
writes counts against its memory (no writable /dev/shm), its processes are capped, its directory
has one quota for all its files, and that directory is made fresh under a root only the worker
can write, named by a digest of the run, and gone when the cell ends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.rlm import RlmActivities
from domain.settings import Settings
from rlm import sandbox
from rlm.repl import CellInput, ReplConfig
from rlm.sandbox import (
    CellDirectoryRefused,
    CellLimits,
    CellOutcome,
    cell_dir_prefix,
    cell_directory,
    run_cell,
)
from tests.test_rlm_isolation import GUARD_OFF

pytestmark = pytest.mark.skipif(
    sandbox.bubblewrap_available() is not None,
    reason=f"bubblewrap cannot run here: {sandbox.bubblewrap_available()}",
)


def cell(code: str, tmp_path: Path, **limits: Any) -> CellOutcome:
    return run_cell(
        code,
        workdir=tmp_path / "cell",
        handle=lambda method, args, kwargs: None,
        store_methods=[],
        context=None,
        snapshot=None,
        memo=[],
        can_recurse=False,
        limits=CellLimits(timeout_seconds=limits.pop("timeout", 5), **limits),
    )


def bounded(outcome: CellOutcome) -> str:
    assert outcome.error is not None
    assert len(outcome.error) <= sandbox.MAX_ERROR_CHARS + sandbox.BOUND_NOTE_CHARS
    return outcome.error


@pytest.mark.parametrize(
    ("target", "refusal"),
    [
        # tmpfs outside the cell's limits (320 MB were written under 128 MB): not writable now
        ("/dev/shm/blob", "Read-only file system: '/dev/shm/blob0' (the sandbox: only the cell's"),
        # the cell's own directory is RAM too: its quota is carved out of memory_mb
        ("blob", "No space left on device (the sandbox: the cell's directory holds 16 MB"),
    ],
)
def test_ram_a_cell_writes_counts_within_its_memory(target: str, refusal: str, tmp_path: Path):
    code = GUARD_OFF + (  # 300 files of 1 MB: each within the file size limit
        "for i in range(300):\n"
        f"    with open({target!r} + str(i), 'wb') as f:\n"
        "        f.write(b'x' * 2**20)\n"
    )
    outcome = cell(code, tmp_path, memory_mb=128, disk_mb=16)
    assert refusal in bounded(outcome)


FORKS = GUARD_OFF + (
    "import _posixsubprocess, os, time\n"
    "started = 0\n"
    "er, ew = os.pipe()\n"
    "try:\n"
    "    for _ in range(150):\n"
    "        _posixsubprocess.fork_exec([b'/bin/sleep', b'31.7'], [b'/bin/sleep'], True, (ew,),\n"
    "            None, None, -1, -1, -1, -1, -1, -1, er, ew, True, False, -1, None, None, -1,\n"
    "            -1, None, False)\n"
    "        started += 1\n"
    "finally:\n"
    "    print('started', started)\n"
    "    time.sleep(1)  # holding them all\n"
)


def sleepers() -> list[psutil.Process]:
    return [
        p for p in psutil.process_iter(["cmdline"]) if (p.info["cmdline"] or [])[-1:] == ["31.7"]
    ]


@pytest.mark.parametrize("cgroups", ["as this worker has them", "without cgroups"])
def test_a_cell_runs_at_most_its_processes(
    cgroups: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    if cgroups == "without cgroups":  # the fallback: RLIMIT_NPROC, or counting for root
        monkeypatch.setattr(sandbox.CellCgroup, "make", classmethod(lambda cls, *a: None))
    outcome = cell(FORKS, tmp_path, max_processes=8)
    error = bounded(outcome)
    if "ProcessLimit" in error:  # counted and stopped: the whole sandbox killed
        assert "more than 8 processes and threads" in error
    else:  # refused by the kernel: the ninth task never starts
        assert "at most 8 processes and threads" in error, error
        assert outcome.stdout.startswith("started ") and int(outcome.stdout.split()[1]) <= 7
    _, alive = psutil.wait_procs(sleepers(), timeout=5)
    assert alive == []


def test_a_cells_processes_and_files_share_its_memory(tmp_path: Path):
    probe = sandbox.CellCgroup.make(4, 2**27)
    if probe is None:
        pytest.skip("no cgroup for this worker: each process has its own address space limit")
    probe.remove()
    code = GUARD_OFF + (  # 15 MB of files, and four children of 60 MB: each within its limits
        "import os, time\n"
        "open('files', 'wb').write(b'x' * 15 * 2**20)\n"
        "children = []\n"
        "for _ in range(4):\n"
        "    child = os.fork()\n"
        "    if child == 0:\n"
        "        held = b'x' * 60 * 2**20\n"
        "        time.sleep(1)\n"
        "        os._exit(0)\n"
        "    children.append(child)\n"
        "for child in children:\n"
        "    os.waitpid(child, 0)\n"
    )
    outcome = cell(code, tmp_path, memory_mb=128, disk_mb=16)
    assert "MemoryError: the cell's processes and files went past its 128 MB" in bounded(outcome)


def test_the_directory_has_one_quota_for_all_its_files(tmp_path: Path):
    code = (
        "for i in range(100):\n"
        "    with open(f'part{i}', 'wb') as f:\n"
        "        f.write(b'x' * 2 * 2**20)\n"
    )
    outcome = cell(code, tmp_path, file_mb=2, disk_mb=16, memory_mb=256)
    assert "No space left on device (the sandbox: the cell's directory holds 16 MB" in bounded(
        outcome
    )
    assert list((tmp_path / "cell").iterdir()) == []  # nothing of it on the host's disk


@pytest.mark.parametrize("planted", ["symlink", "open to others", "someone else's"])
def test_a_root_that_is_not_the_workers_own_is_refused(planted: str, tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    root = tmp_path / "cells"
    if planted == "symlink":  # a cell's writes would land wherever it points
        root.symlink_to(elsewhere)
        why = "is a symlink"
    elif planted == "open to others":
        root.mkdir()
        root.chmod(0o1777)
        why = "is open to others"
    else:
        if os.geteuid() != 0:
            pytest.skip("making a directory someone else's takes root")
        root.mkdir(mode=0o700)
        os.chown(root, 65534, 65534)
        why = "belongs to uid 65534"
    with pytest.raises(CellDirectoryRefused, match=why), cell_directory(root, "r", "root"):
        pass
    assert list(elsewhere.iterdir()) == []
    # through the activity, the step fails at once and names the setting to change
    activities = RlmActivities(None, Settings(rlm_cells_dir=str(root)))  # type: ignore[arg-type]
    with pytest.raises(ApplicationError, match="TRAINING_CAMP_RLM_CELLS_DIR") as refused:
        run_step(activities, "r", "print(1)")
    assert refused.value.type == "CellDirectoryRefused" and refused.value.non_retryable


def run_step(activities: RlmActivities, run_id: str, code: str) -> CellOutcome:
    """The activity's cell step, as a worker runs it (in an activity's context: it heartbeats)."""
    limits = CellLimits(timeout_seconds=5, memory_mb=256)
    step = CellInput(
        run_id=run_id,
        worker="root",
        depth=0,
        turn=1,
        code=code,
        context_hash="-",
        snapshot_hash=None,
        config=ReplConfig(cell_limits=limits),
    )
    return ActivityEnvironment().run(activities._run, step, lambda *a: None, None, None)


def test_run_ids_that_differ_only_in_separators_share_nothing(tmp_path: Path):
    cells = tmp_path / "cells"
    activities = RlmActivities(None, Settings(rlm_cells_dir=str(cells)))  # type: ignore[arg-type]
    look = "import os\nprint(os.getcwd(), sorted(os.listdir('.')))\n"
    write = "open('mine', 'w').write('of a:b')\n"
    seen = [run_step(activities, run_id, look + write).stdout for run_id in ("a:b", "a_b", "a/b")]
    assert [s.split()[1] for s in seen] == ["[]", "[]", "[]"]  # none sees another's file
    assert len({s.split()[0] for s in seen}) == 3
    assert len({cell_dir_prefix(r, "root") for r in ("a:b", "a_b", "a/b")}) == 3
    assert list(cells.iterdir()) == []  # each directory gone when its cell ended
    assert (cells.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("keep_failed", [False, True])
def test_a_cells_directory_is_gone_after_it_unless_a_failure_is_kept(
    keep_failed: bool, tmp_path: Path
):
    cells = tmp_path / "cells"
    settings = Settings(rlm_cells_dir=str(cells), rlm_keep_failed_cells=keep_failed)
    activities = RlmActivities(None, settings)  # type: ignore[arg-type]
    fine = run_step(activities, "run", "print('ok')")
    assert fine.error is None and list(cells.iterdir()) == []
    secret = tmp_path / "secret.txt"
    secret.write_text("the worker's file")
    failed = run_step(
        activities,
        "run",
        GUARD_OFF + "import os\nos.mkdir('sub')\nopen('sub/notes.txt', 'w').write('so far')\n"
        # a link the copy must not follow: on the host it would name the worker's file
        f"os.symlink({str(secret)!r}, 'link')\n"
        "1 / 0",
    )
    assert failed.error is not None and failed.error.startswith("ZeroDivisionError")
    kept = list(cells.iterdir())
    assert len(kept) == (1 if keep_failed else 0)
    if keep_failed:  # its files, copied out of the sandbox's tmpfs; the link is not followed
        assert kept[0].name.startswith(cell_dir_prefix("run", "root"))
        assert (kept[0] / "sub" / "notes.txt").read_text() == "so far"
        assert sorted(p.name for p in kept[0].iterdir()) == ["sub"]


def test_a_delegated_cgroups_v2_tree_gets_a_capped_cgroup_per_cell(tmp_path: Path):
    """The v2 path's own logic on a stand-in tree (this machine's unified hierarchy has no
    controllers, so the kernel side is exercised through v1 above): the controllers enabled for
    the cells' parent, the caps written, and the command started inside the cell's cgroup."""
    if not any(line.startswith("0::") for line in Path("/proc/self/cgroup").read_text().split()):
        pytest.skip("no unified cgroup line for this process")
    own = Path("/proc/self/cgroup").read_text().split("0::", 1)[1].split()[0].lstrip("/")
    parent = tmp_path / own / "training-camp-cells"
    parent.mkdir(parents=True)
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    (parent / "cgroup.controllers").write_text("cpu memory pids\n")
    (parent / "cgroup.subtree_control").write_text("\n")
    made = sandbox.CellCgroup.make(10, 128 * 2**20, fs=tmp_path)
    assert made is not None and made.version == 2
    (cell_dir,) = made.dirs
    assert (parent / "cgroup.subtree_control").read_text() == "+pids +memory"
    assert (cell_dir / "pids.max").read_text() == "10"
    assert (cell_dir / "memory.max").read_text() == str(128 * 2**20)
    done = subprocess.run(made.wrap(["/bin/sh", "-c", "echo $$"]), capture_output=True, text=True)
    assert (
        done.stdout.strip() == (cell_dir / "cgroup.procs").read_text().strip()
    )  # joined, then ran
    (parent / "cgroup.controllers").write_text("cpu\n")  # not delegated: no cgroup, the fallback
    assert sandbox.CellCgroup.make(10, 2**27, fs=tmp_path) is None
