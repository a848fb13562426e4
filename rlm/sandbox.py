"""Running one model-written REPL cell safely: in an OS-level sandbox of its own, with a time
limit, a memory limit and bounded results.

The boundary is bubblewrap (``bwrap``): each cell runs in new user, mount, PID, network, IPC and
UTS namespaces, as an unprivileged user, seeing only the Python runtime (read-only), its own
program file and its own working directory — no ``/tmp``, no ``/etc``, no ``/var/run`` (so no
database sockets), no store or key files, no network. Every process it starts lives in its PID
namespace and dies with it, and the sandbox dies with the worker. Resource limits (address space,
CPU, file size) are set inside before the cell runs, and an audit hook (``rlm/cell_process.py``)
refuses processes, native code, sockets and writes outside the cell's directory as a second layer.

A cell takes only what it is given: its directory is a fresh tmpfs of ``disk_mb`` inside the
sandbox (all its files together; RAM-backed, so it is carved out of ``memory_mb``), nothing else
is writable (``/dev`` is read-only: no ``/dev/shm``), and its processes and threads are capped at
``max_processes`` — by a cgroup of its own where the worker can make one (which also holds all
its memory, files included, to ``memory_mb``: ``rlm/cell_cgroup.py``), else by ``RLIMIT_NPROC``
in its user namespace, which the kernel enforces for every worker but root; for a root worker
without cgroups, the sandbox counts the cell's tasks ten times a second and stops it past the cap.
The host directory a cell is given (``cell_directory``) is made fresh under a root only the worker
can write, named by a digest of the run and worker, and removed when the cell ends.

Where the kernel refuses namespaces (or ``bwrap`` is missing), cells do not run unless the operator
opts into the weaker mode by name, ``TRAINING_CAMP_RLM_ISOLATION=audit-hook-only``: the audit hook
and the limits alone, which guard against honest mistakes but are no boundary against a hostile
cell (PEP 578: an audit hook cannot sandbox the interpreter it runs in).

Every result is bounded at this boundary, whatever the cell did to its own process: what it
printed, its error, its ``FINAL_VAR`` (which travels through the workflow's history) and the
namespace snapshot it leaves. Larger results are refused with a message the model can act on.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import selectors
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from rlm.cell_cgroup import CellCgroup
from rlm.cell_process import call_refusal

CELL_PROGRAM = str(Path(__file__).with_name("cell_process.py"))
MAX_STDOUT_CHARS = 20_000
MAX_ERROR_CHARS = 4_000
BOUND_NOTE_CHARS = 40  # "… [N more characters]"
MAX_FINAL_BYTES = 256 * 1024  # FINAL_VAR crosses Temporal: far below its 2 MB payload limit
MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
# the cell's report: its snapshot (base64) and the rest, bounded; a longer line is refused
MAX_REPORT_BYTES = MAX_SNAPSHOT_BYTES * 4 // 3 + MAX_FINAL_BYTES + 4 * MAX_STDOUT_CHARS + 65_536
MAX_PRINTED_BYTES = 4 * MAX_STDOUT_CHARS  # what the process wrote outside the cell's capture
MAX_KEPT_ENTRIES = 10_000  # files and directories copied out of a failed cell (a tmpfs's size
# bounds its bytes, not how many empty files it holds)
# A cell's calls cross Temporal too (the workflow makes them): the arguments of one call
# (llm_query prompts; rlm_worker prompts and cards — contexts go to the store), the prompts
# one batched call may send, and the answers one cell receives in all (they are handed back
# to every run of the cell). Past them the cell gets CallTooLarge or ResultTooLarge.
MAX_CALL_BYTES = 256 * 1024
MAX_CALL_PROMPTS = 64
MAX_ANSWERS_BYTES = 1024 * 1024
# The conversation each model turn is sent (the workflow holds it and sends it every turn)
MAX_TRANSCRIPT_BYTES = 256 * 1024
CALL_BOUNDS = {"call_bytes": MAX_CALL_BYTES, "call_prompts": MAX_CALL_PROMPTS}
Isolation = Literal["bubblewrap", "audit-hook-only"]
ISOLATIONS: tuple[Isolation, ...] = ("bubblewrap", "audit-hook-only")
# What a sandboxed cell sees of the host, read-only (the Python runtime and its libraries)
SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin")
NOBODY = "65534"


class SandboxUnavailable(RuntimeError):
    """Cells cannot run with the isolation asked for on this machine (the message says why and
    what to do)."""


class CellDirectoryRefused(RuntimeError):
    """The root cells' directories are made under is not the worker's own (the message says
    why and what to do)."""


class CellLimits(BaseModel):
    timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    # All the RAM the cell holds: its processes and its directory's files (a tmpfs)
    memory_mb: int = Field(default=512, ge=64, le=16_384)
    file_mb: int = Field(default=16, ge=1, le=1024)  # one file
    # The cell's directory, all files together; by default a quarter of memory_mb, at most 64
    disk_mb: int | None = Field(default=None, ge=1, le=8192)
    # Processes and threads, the cell's own interpreter included
    max_processes: int = Field(default=16, ge=1, le=1024)

    @model_validator(mode="after")
    def _directory_within_memory(self) -> CellLimits:
        if self.disk_mb is not None and self.disk_mb > self.memory_mb // 2:
            raise ValueError(
                f"disk_mb ({self.disk_mb}) must be at most half of memory_mb ({self.memory_mb}): "
                "the cell's directory is RAM, counted in its memory"
            )
        return self

    @property
    def directory_mb(self) -> int:
        return self.disk_mb if self.disk_mb is not None else min(64, self.memory_mb // 4)


class CellOutcome(BaseModel):
    stdout: str = ""
    error: str | None = None
    final: Any = None
    final_set: bool = False
    snapshot: str | None = None  # the namespace it leaves (base64 cloudpickle)
    dropped: list[str] = Field(default_factory=list)
    suspended: dict[str, Any] | None = None  # the call the workflow must make first


@functools.cache
def bubblewrap_available() -> str | None:
    """None when bubblewrap can make a sandbox here; else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap is not installed (Debian: apt-get install bubblewrap)"
    try:
        done = subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "--", "/bin/true"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {exc}"
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip()[:300]
        return f"the kernel refused bubblewrap's namespaces ({said})"
    return None


def _system_binds() -> list[str]:
    binds: list[str] = []
    for path in (*SYSTEM_DIRS, sys.base_prefix, sys.prefix, sys.exec_prefix):
        if os.path.exists(path) and path not in binds[1::3]:
            binds += ["--ro-bind", path, path]
    return binds


def _bubblewrap(workdir: Path, inner: list[str], limits: CellLimits) -> list[str]:
    """``inner`` in a bubblewrap sandbox that sees the runtime, and at ``workdir`` a fresh tmpfs
    of ``limits.directory_mb`` (its quota: all files together), nothing else writable."""
    return [
        "bwrap",
        "--unshare-all",  # user, mount, PID, network, IPC, UTS and cgroup namespaces
        "--die-with-parent",
        "--new-session",
        "--uid",
        NOBODY,
        "--gid",
        NOBODY,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--remount-ro",  # no writable /dev/shm: RAM the memory limit would not see
        "/dev",
        *_system_binds(),
        "--ro-bind",
        CELL_PROGRAM,
        CELL_PROGRAM,
        "--size",  # the directory's quota, whatever the number or size of its files
        str(limits.directory_mb * 2**20),
        "--perms",
        "0700",
        "--tmpfs",
        str(workdir),
        "--remount-ro",  # the sandbox's own root too: only the cell's directory is writable
        "/",
        "--chdir",
        str(workdir),
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin:/bin",
        "--setenv",
        "HOME",
        str(workdir),
        "--setenv",
        "LANG",
        "C.UTF-8",
        "--",
        *inner,
    ]


@functools.cache
def network_namespace_available() -> bool:
    """Whether this kernel lets an unprivileged process take a network namespace of its own."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run(
            [unshare, "--user", "--map-root-user", "--net", "true"], capture_output=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def cell_dir_prefix(run_id: str, worker: str) -> str:
    """A cell directory's name: a digest of its run and worker, so ids that differ only in
    characters a path cannot hold (``:``, ``/``) never share a directory."""
    return hashlib.sha256(f"{run_id}\0{worker}".encode()).hexdigest()[:32]


def private_root(root: Path) -> Path:
    """``root``, made if missing, where only this worker may write: refused when it is a
    symlink, not a directory, not owned by the worker, or open to anyone else."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    info = os.lstat(root)
    why = (
        "is a symlink"
        if stat.S_ISLNK(info.st_mode)
        else "is not a directory"
        if not stat.S_ISDIR(info.st_mode)
        else f"belongs to uid {info.st_uid}, not this worker's {os.geteuid()}"
        if info.st_uid != os.geteuid()
        else f"is open to others (mode {stat.S_IMODE(info.st_mode):o})"
        if info.st_mode & 0o077
        else None
    )
    if why is not None:
        raise CellDirectoryRefused(
            f"the cells' directory root {root} {why}; remove it, or set "
            "TRAINING_CAMP_RLM_CELLS_DIR to a directory only the worker can write"
        )
    return root


class CellDirectory:
    """A cell's fresh directory on the host; ``failed`` stays True unless the caller says the
    cell succeeded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.failed = True


@contextlib.contextmanager
def cell_directory(
    root: Path, run_id: str, worker: str, *, keep_failed: bool = False
) -> Iterator[CellDirectory]:
    """A directory made fresh for one cell (``mkdtemp``: new, 0700, never an existing path)
    under ``private_root(root)``, removed when the cell ends — kept after a failure only with
    ``keep_failed`` (``TRAINING_CAMP_RLM_KEEP_FAILED_CELLS``)."""
    made = tempfile.mkdtemp(prefix=f"{cell_dir_prefix(run_id, worker)}-", dir=private_root(root))
    directory = CellDirectory(Path(made))
    try:
        yield directory
    finally:
        if not (keep_failed and directory.failed):
            shutil.rmtree(made, ignore_errors=True)


StoreHandler = Callable[[str, list[Any], dict[str, Any]], Any]


def run_cell(
    code: str,
    *,
    workdir: Path,
    handle: StoreHandler,
    store_methods: list[str],
    context: Any,
    snapshot: str | None,
    memo: list[Any],
    can_recurse: bool,
    limits: CellLimits,
    alive: Callable[[], None] = lambda: None,
    isolation: Isolation = "bubblewrap",
    keep_failed: bool = False,
) -> CellOutcome:
    """Run ``code`` after restoring ``snapshot``; store calls go to ``handle``; ``alive`` is
    called about once a second while the cell runs (the activity's heartbeat). With
    ``keep_failed``, a cell that reports an error leaves a copy of its files in ``workdir`` (in
    the sandbox they live in a tmpfs of its own, gone with it). Raises SandboxUnavailable when
    ``isolation`` cannot be had here."""
    if isolation == "bubblewrap" and (why := bubblewrap_available()) is not None:
        raise SandboxUnavailable(
            f"RLM cells run in a bubblewrap sandbox, and {why}. Install bubblewrap on the "
            "worker, or set TRAINING_CAMP_RLM_ISOLATION=audit-hook-only to run cells under the "
            "in-process guard alone (no boundary against a hostile cell)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    workdir = workdir.resolve()
    memory = limits.memory_mb * 2**20
    cgroup = None
    command = [sys.executable, "-I", CELL_PROGRAM]
    if isolation == "bubblewrap":
        # the two bubblewrap processes (outside, and the sandbox's init) beside the cell's own
        cgroup = CellCgroup.make(limits.max_processes + 2, memory)
        command = _bubblewrap(workdir, command, limits)
        if cgroup is not None:
            command = cgroup.wrap(command)
    elif network_namespace_available():
        command = ["unshare", "--user", "--map-root-user", "--net", "--", *command]
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    command += [str(to_child_r), str(from_child_w)]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8"}
    process = subprocess.Popen(
        command,
        pass_fds=(to_child_r, from_child_w),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        env=env,
        start_new_session=True,  # its own process group: a kill takes everything it started
    )
    os.close(to_child_r)
    os.close(from_child_w)
    outbox = os.fdopen(to_child_w, "w", encoding="utf-8")
    inbox = os.fdopen(from_child_r, "r", encoding="utf-8")
    job = {
        "code": code,
        "snapshot": snapshot,
        "memo": memo,
        "context": context,
        "store_methods": store_methods,
        "can_recurse": can_recurse,
        "workdir": str(workdir),
        "limits": {
            # the directory's files are RAM too: a process gets what they leave of memory_mb
            "memory_bytes": memory - limits.directory_mb * 2**20,
            "cpu_seconds": max(1, int(limits.timeout_seconds)),
            "file_bytes": limits.file_mb * 2**20,
            "directory_mb": limits.directory_mb,
            # counted in the cell's own user namespace, where the sandbox's init is the only
            # other task (the kernel does not enforce it for host root: the cgroup or the count
            # below does)
            "processes": limits.max_processes + 1 if isolation == "bubblewrap" else None,
            "max_processes": limits.max_processes,
        },
        "bounds": {
            "stdout_chars": MAX_STDOUT_CHARS,
            "error_chars": MAX_ERROR_CHARS,
            "final_bytes": MAX_FINAL_BYTES,
            "snapshot_bytes": MAX_SNAPSHOT_BYTES,
            "call_bytes": MAX_CALL_BYTES,
            "call_prompts": MAX_CALL_PROMPTS,
        },
    }
    # without a cgroup, a root worker's cell is held to its cap by counting (RLIMIT_NPROC does
    # not bind host root); counting costs little, so it is done whenever there is no cgroup
    counted = None if cgroup is not None or isolation != "bubblewrap" else limits.max_processes
    try:
        outbox.write(json.dumps(job) + "\n")
        outbox.flush()
        keep_to = workdir if keep_failed and isolation == "bubblewrap" else None
        outcome = _converse(process, inbox, outbox, handle, limits, alive, counted, cgroup, keep_to)
        if (
            cgroup is not None
            and cgroup.oom_killed()
            and "MemoryError" not in (outcome.error or "")
        ):
            # a process of the cell was killed (a child, say) while the cell itself went on
            outcome.error = (outcome.error or "") + _out_of_memory(limits)
        return outcome
    except BrokenPipeError:
        return _ended(process, limits, cgroup)
    finally:
        for stream in (outbox, inbox):
            with contextlib.suppress(OSError):
                stream.close()
        if process.poll() is None:
            _kill(process)
        if cgroup is not None:  # a detached child too: nothing the cell started outlives it
            cgroup.kill_all()
            cgroup.remove()


def _converse(
    process: subprocess.Popen[bytes],
    inbox: Any,
    outbox: Any,
    handle: StoreHandler,
    limits: CellLimits,
    alive: Callable[[], None],
    counted: int | None,
    cgroup: CellCgroup | None,
    keep_to: Path | None,
) -> CellOutcome:
    # Wall clock: twice the CPU allowance, so a cell that sleeps or blocks is stopped too.
    deadline = time.monotonic() + 2 * limits.timeout_seconds
    selector = selectors.DefaultSelector()
    selector.register(inbox, selectors.EVENT_READ)
    tick = 1.0 if counted is None else 0.1
    while True:
        alive()
        # the bubblewrap process outside and the sandbox's init are not the cell's
        if counted is not None and _tasks(process.pid) - 2 > counted:
            _kill(process)
            return CellOutcome(
                stdout=_printed(process),
                error=f"ProcessLimit: the cell ran more than {counted} processes and threads "
                "and was stopped (the sandbox's limit, max_processes)",
            )
        left = deadline - time.monotonic()
        if left > 0 and not selector.select(timeout=min(left, tick)):
            continue
        if left <= 0:
            _kill(process)
            return CellOutcome(
                stdout=_printed(process),
                error=f"TimeoutError: the cell ran past its {2 * limits.timeout_seconds:g} s "
                "limit and was stopped",
            )
        line = inbox.readline(MAX_REPORT_BYTES + 1)
        if not line:
            return _ended(process, limits, cgroup)
        if not line.endswith("\n"):  # longer than any honest report: refused, not read on
            _kill(process)
            return CellOutcome(
                error=f"ResultTooLarge: the cell sent more than {MAX_REPORT_BYTES // 2**20} MB "
                "at once; the sandbox refuses it (keep large data in the store)"
            )
        message = json.loads(line)
        if message["type"] == "store":
            try:
                reply = {"ok": handle(message["method"], message["args"], message["kwargs"])}
            except Exception as exc:  # the cell sees the store's refusal, as the REPL would
                reply = {"error": f"{type(exc).__name__}: {exc}"}
            outbox.write(json.dumps(reply, default=str) + "\n")
            outbox.flush()
        elif message["type"] == "suspend":
            process.wait(timeout=30)
            call = message["call"]
            refused = call_refusal(str(call.get("kind")), call.get("args") or {}, CALL_BOUNDS)
            if refused is not None:  # the cell's own check was bypassed: refused here too
                return CellOutcome(error=refused)
            return CellOutcome(suspended=call)
        else:
            outcome = CellOutcome.model_validate({k: v for k, v in message.items() if k != "type"})
            if outcome.error is not None and keep_to is not None:
                _copy_out(process.pid, keep_to, limits.directory_mb * 2**20)
            outbox.close()  # the cell waits for this before it exits: its files are there till then
            process.wait(timeout=30)
            extra = _printed(process)
            if extra:
                outcome.stdout += extra
            return _within_bounds(outcome)


def _ended(
    process: subprocess.Popen[bytes], limits: CellLimits, cgroup: CellCgroup | None
) -> CellOutcome:
    """The cell's process ended without reporting: a limit killed it, or the interpreter died."""
    code = process.wait(timeout=30)
    printed = _printed(process)
    # a signal: the process's own (negative), or as bubblewrap reports its child's (128 + n)
    died_of = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else None
    if cgroup is not None and cgroup.oom_killed():
        reason = _out_of_memory(limits)
    elif died_of in (signal.SIGXCPU, signal.SIGKILL):
        reason = (
            f"TimeoutError: the cell used its {limits.timeout_seconds:g} s of CPU and was stopped"
        )
    elif died_of is not None:
        reason = f"the cell's process died of signal {signal.Signals(died_of).name}"
    else:
        reason = f"the cell's process exited with status {code} before finishing"
    return CellOutcome(stdout=printed, error=reason)


def _out_of_memory(limits: CellLimits) -> str:
    return (
        f"MemoryError: the cell's processes and files went past its {limits.memory_mb} MB of "
        "memory, and the kernel killed a process of it"
    )


def _within_bounds(outcome: CellOutcome) -> CellOutcome:
    """The cell's report, bounded whatever the cell did to its own process's checks."""
    outcome.stdout = _bounded(outcome.stdout, MAX_STDOUT_CHARS)
    if outcome.error is not None:
        outcome.error = _bounded(outcome.error, MAX_ERROR_CHARS)
    if outcome.final_set:
        size = len(json.dumps(outcome.final, default=str).encode("utf-8"))
        if size > MAX_FINAL_BYTES:
            outcome.final, outcome.final_set = None, False
            outcome.error = (
                f"ResultTooLarge: FINAL_VAR's value is {size // 1024} KB; the limit is "
                f"{MAX_FINAL_BYTES // 1024} KB. Return a summary, or store.create the data and "
                "return its id"
            )
    if outcome.snapshot is not None and len(outcome.snapshot) * 3 // 4 > MAX_SNAPSHOT_BYTES:
        outcome.snapshot = None
        outcome.dropped = [f"(the namespace: over the {MAX_SNAPSHOT_BYTES // 2**20} MB limit)"]
    return outcome


def _printed(process: subprocess.Popen[bytes]) -> str:
    """What the process wrote to its own stdout/stderr (native code, the interpreter), bounded:
    a process still holding the pipe open does not keep this waiting."""
    if process.stdout is None or process.poll() is None:
        return ""
    os.set_blocking(process.stdout.fileno(), False)
    try:
        data = process.stdout.read(MAX_PRINTED_BYTES) or b""
    except BlockingIOError:
        data = b""
    return _bounded(data.decode("utf-8", "replace"), MAX_STDOUT_CHARS)


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit + BOUND_NOTE_CHARS:  # within the limit, or cut with its note already
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters]"


def _copy_out(pid: int, workdir: Path, budget: int) -> None:
    """A failed cell's files, copied to ``workdir`` on the host from its sandbox's tmpfs (seen
    through the sandbox init's root while the cell waits): directories and regular files only,
    opened relative to their directory and never through a link (the cell may still be changing
    them), at most ``budget`` bytes and ``MAX_KEPT_ENTRIES`` entries."""
    entries = 0
    try:
        init = _children(pid)[0]  # bubblewrap's child, the sandbox's init: its mounts
        top = f"/proc/{init}/root{workdir}"
        for dirpath, _, files, dirfd in os.fwalk(top, follow_symlinks=False):
            here = workdir / os.path.relpath(dirpath, top)
            here.mkdir(mode=0o700, exist_ok=True)
            entries += 1 + len(files)
            if entries > MAX_KEPT_ENTRIES:
                return
            for name in files:
                with contextlib.suppress(OSError):  # a link, a device, or gone meanwhile
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
                    with os.fdopen(fd, "rb") as source:
                        if not stat.S_ISREG(os.fstat(fd).st_mode):
                            continue
                        data = source.read(budget)
                    budget -= len(data)
                    (here / name).write_bytes(data)
                if budget <= 0:
                    return
    except (OSError, IndexError) as exc:  # kept without its files: say why, there
        (workdir / "NOT-KEPT.txt").write_text(f"the cell's files could not be copied: {exc}\n")


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as children:
        return [int(c) for c in children.read().split()]


def _tasks(pid: int) -> int:
    """Processes and threads under ``pid`` (itself included): the whole sandbox, as every
    process in it descends from bubblewrap, orphans being adopted by the sandbox's init."""
    count, pending = 0, [pid]
    while pending:
        current = pending.pop()
        with contextlib.suppress(OSError, ValueError):
            tasks = os.listdir(f"/proc/{current}/task")
            count += len(tasks)
            for task in tasks:
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending += [int(c) for c in children.read().split()]
    return count


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
