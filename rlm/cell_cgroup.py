"""A cgroup of its own for one sandboxed cell, where the worker may make one: a cap on the cell's
processes and threads (``pids.max``) and on all the memory it holds (``memory.max``: its
processes, and its RAM-backed directory's files, which the kernel charges to the cgroup that
wrote them).

cgroups v2 when the worker's own cgroup delegates ``pids`` and ``memory`` to its children;
otherwise the v1 ``pids`` and ``memory`` hierarchies when the worker can write them (a root worker
on a v1 or hybrid host). Where neither can be had, ``make`` returns None and the sandbox relies on
its fallback (``RLIMIT_NPROC`` in the cell's user namespace; see ``rlm/sandbox.py``).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path

CGROUP_FS = Path("/sys/fs/cgroup")
PARENT = "training-camp-cells"


class CellCgroup:
    def __init__(self, dirs: list[Path], version: int) -> None:
        self.dirs = dirs  # one per hierarchy (v2: one; v1: pids and memory)
        self.version = version

    @classmethod
    def make(cls, max_tasks: int, memory_bytes: int, fs: Path = CGROUP_FS) -> CellCgroup | None:
        """A fresh cgroup holding at most ``max_tasks`` tasks and ``memory_bytes`` of memory, or
        None when this worker cannot make one here."""
        name = f"cell-{os.getpid()}-{secrets.token_hex(6)}"
        try:
            return _v2(fs, name, max_tasks, memory_bytes) or _v1(fs, name, max_tasks, memory_bytes)
        except OSError:
            return None

    def wrap(self, command: list[str]) -> list[str]:
        """``command``, started inside this cgroup: a shell joins it, then becomes the command,
        so nothing the command starts is ever outside it."""
        join = " && ".join(f'echo $$ > "${i + 1}"' for i in range(len(self.dirs)))
        procs = [str(d / "cgroup.procs") for d in self.dirs]
        shift = f"shift {len(procs)}"
        return ["/bin/sh", "-c", f'{join} && {shift} && exec "$@"', "sh", *procs, *command]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process here for going past the memory limit."""
        memory = self.dirs[-1]
        events = memory / ("memory.events" if self.version == 2 else "memory.oom_control")
        with contextlib.suppress(OSError, ValueError):
            for line in events.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def kill_all(self) -> None:
        """Every process still in the cgroup, killed (a detached child included)."""
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            with contextlib.suppress(OSError):
                (self.dirs[0] / "cgroup.kill").write_text("1")
            return
        for _ in range(50):
            pids = self._pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> None:
        """Removed once empty (a killed process may take a moment to leave): at most ~2 s."""
        for directory in self.dirs:
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still busy: a dying process is on its way out
                    time.sleep(0.02)

    def _pids(self) -> list[int]:
        pids: set[int] = set()
        for directory in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        return sorted(pids)


def _own(hierarchy: str) -> str | None:
    """This process's cgroup in ``hierarchy`` ("" for v2's unified one), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if hierarchy in controllers.split(","):
            return path
    return None


def _v2(fs: Path, name: str, max_tasks: int, memory_bytes: int) -> CellCgroup | None:
    own = _own("")
    if not (fs / "cgroup.controllers").exists() or own is None:
        return None  # not a v2 host (a v1 or hybrid one: its unified tree has no controllers)
    parent = fs / own.lstrip("/") / PARENT
    parent.mkdir(exist_ok=True)
    wanted = {"pids", "memory"}
    if not wanted <= set((parent / "cgroup.controllers").read_text().split()):
        return None  # not delegated to this worker's cgroup
    if not wanted <= set((parent / "cgroup.subtree_control").read_text().split()):
        (parent / "cgroup.subtree_control").write_text("+pids +memory")
    _sweep(parent)
    cell = parent / name
    cell.mkdir()
    (cell / "pids.max").write_text(str(max_tasks))
    (cell / "memory.max").write_text(str(memory_bytes))
    with contextlib.suppress(OSError):  # no swap to spill into, where the kernel has it
        (cell / "memory.swap.max").write_text("0")
    return CellCgroup([cell], 2)


def _v1(fs: Path, name: str, max_tasks: int, memory_bytes: int) -> CellCgroup | None:
    owns = {h: _own(h) for h in ("pids", "memory")}
    if any(own is None or not (fs / h / "cgroup.procs").exists() for h, own in owns.items()):
        return None
    dirs: list[Path] = []
    try:
        for hierarchy, own in owns.items():
            parent = fs / hierarchy / str(own).lstrip("/") / PARENT
            parent.mkdir(parents=True, exist_ok=True)
            _sweep(parent)
            cell = parent / name
            cell.mkdir()
            dirs.append(cell)
        (dirs[0] / "pids.max").write_text(str(max_tasks))
        (dirs[1] / "memory.limit_in_bytes").write_text(str(memory_bytes))
    except OSError:
        CellCgroup(dirs, 1).remove()
        raise
    return CellCgroup(dirs, 1)


def _sweep(parent: Path) -> None:
    """Cgroups a worker left when it was killed mid-cell (``cell-<its pid>-…``, its pid gone):
    removed, if empty (a busy one refuses)."""
    for stale in parent.glob("cell-*-*"):
        with contextlib.suppress(ValueError, OSError):
            pid = int(stale.name.split("-")[1])
            if pid != os.getpid() and not Path(f"/proc/{pid}").exists():
                stale.rmdir()
