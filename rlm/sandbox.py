"""Running one model-written REPL cell safely: in an OS-level sandbox of its own, with a time
limit, a memory limit and bounded results.

The boundary is bubblewrap (``bwrap``): each cell runs in new user, mount, PID, network, IPC and
UTS namespaces, as an unprivileged user, seeing only the Python runtime (read-only), its own
program file and its own working directory (read-write) — no ``/tmp``, no ``/etc``, no
``/var/run`` (so no database sockets), no store or key files, no network. Every process it starts
lives in its PID namespace and dies with it, and the sandbox dies with the worker. Resource limits
(address space, CPU, file size) are set inside before the cell runs, and an audit hook
(``rlm/cell_process.py``) refuses processes, native code, sockets and writes outside the cell's
directory as a second layer.

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
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

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


class CellLimits(BaseModel):
    timeout_seconds: float = Field(default=10.0, gt=0, le=600)
    memory_mb: int = Field(default=512, ge=64, le=16_384)
    file_mb: int = Field(default=16, ge=1, le=1024)


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


def _bubblewrap(workdir: Path, inner: list[str]) -> list[str]:
    """``inner`` in a bubblewrap sandbox that sees the runtime and ``workdir`` only."""
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
        *_system_binds(),
        "--ro-bind",
        CELL_PROGRAM,
        CELL_PROGRAM,
        "--bind",
        str(workdir),
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
) -> CellOutcome:
    """Run ``code`` after restoring ``snapshot``; store calls go to ``handle``; ``alive`` is
    called about once a second while the cell runs (the activity's heartbeat). Raises
    SandboxUnavailable when ``isolation`` cannot be had here."""
    if isolation == "bubblewrap" and (why := bubblewrap_available()) is not None:
        raise SandboxUnavailable(
            f"RLM cells run in a bubblewrap sandbox, and {why}. Install bubblewrap on the "
            "worker, or set TRAINING_CAMP_RLM_ISOLATION=audit-hook-only to run cells under the "
            "in-process guard alone (no boundary against a hostile cell)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    workdir = workdir.resolve()
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    command = [sys.executable, "-I", CELL_PROGRAM, str(to_child_r), str(from_child_w)]
    if isolation == "bubblewrap":
        command = _bubblewrap(workdir, command)
    elif network_namespace_available():
        command = ["unshare", "--user", "--map-root-user", "--net", "--", *command]
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
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "cpu_seconds": max(1, int(limits.timeout_seconds)),
            "file_bytes": limits.file_mb * 1024 * 1024,
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
    try:
        outbox.write(json.dumps(job) + "\n")
        outbox.flush()
        return _converse(process, inbox, outbox, handle, limits, alive)
    except BrokenPipeError:
        return _ended(process, None, limits)
    finally:
        for stream in (outbox, inbox):
            with contextlib.suppress(OSError):
                stream.close()
        if process.poll() is None:
            _kill(process)


def _converse(
    process: subprocess.Popen[bytes],
    inbox: Any,
    outbox: Any,
    handle: StoreHandler,
    limits: CellLimits,
    alive: Callable[[], None],
) -> CellOutcome:
    # Wall clock: twice the CPU allowance, so a cell that sleeps or blocks is stopped too.
    deadline = time.monotonic() + 2 * limits.timeout_seconds
    selector = selectors.DefaultSelector()
    selector.register(inbox, selectors.EVENT_READ)
    while True:
        alive()
        left = deadline - time.monotonic()
        if left > 0 and not selector.select(timeout=min(left, 1.0)):
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
            return _ended(process, None, limits)
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
            process.wait(timeout=30)
            outcome = CellOutcome.model_validate({k: v for k, v in message.items() if k != "type"})
            extra = _printed(process)
            if extra:
                outcome.stdout += extra
            return _within_bounds(outcome)


def _ended(process: subprocess.Popen[bytes], _: Any, limits: CellLimits) -> CellOutcome:
    """The cell's process ended without reporting: a limit killed it, or the interpreter died."""
    code = process.wait(timeout=30)
    printed = _printed(process)
    # a signal: the process's own (negative), or as bubblewrap reports its child's (128 + n)
    died_of = -code if code < 0 else code - 128 if 128 < code < 128 + 65 else None
    if died_of in (signal.SIGXCPU, signal.SIGKILL):
        reason = (
            f"TimeoutError: the cell used its {limits.timeout_seconds:g} s of CPU and was stopped"
        )
    elif died_of is not None:
        reason = f"the cell's process died of signal {signal.Signals(died_of).name}"
    else:
        reason = f"the cell's process exited with status {code} before finishing"
    return CellOutcome(stdout=printed, error=reason)


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


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
