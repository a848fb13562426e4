"""Running one model-written REPL cell safely: in a process of its own (``rlm/cell_process.py``)
with a time limit, a memory limit, no network, and a working directory of its own.

What it protects against: a cell that loops forever (CPU limit, then a wall-clock kill), one that
allocates without bound (address-space limit: the allocation fails with MemoryError), one that
opens a socket (a network namespace with no interfaces where the kernel allows one, and an audit
hook refusing every socket either way), one that starts processes, loads native code through
ctypes, writes outside its directory or reads outside its roots (the audit hook), and one that
crashes the interpreter (it is a separate process: the worker carries on). The cell's
environment holds no credentials (PATH, HOME and LANG only).

What it does not protect against: a CPython bug or a C extension already loaded that lets code
escape the audit hook, and a cell that uses its whole CPU and memory allowance (the worker's
machine must have room for ``max_parallel`` cells at their limits). It is a guard for honest
mistakes and casual misuse by a model, not a boundary against a determined attacker: run
workers that execute untrusted models' code in a container or VM of their own as well.
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
from typing import Any

from pydantic import BaseModel, Field

CELL_PROGRAM = str(Path(__file__).with_name("cell_process.py"))
MAX_STDOUT_CHARS = 20_000


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
) -> CellOutcome:
    """Run ``code`` after restoring ``snapshot``; store calls go to ``handle``; ``alive`` is
    called about once a second while the cell runs (the activity's heartbeat)."""
    workdir.mkdir(parents=True, exist_ok=True)
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    command = [sys.executable, "-I", CELL_PROGRAM, str(to_child_r), str(from_child_w)]
    if network_namespace_available():
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
        line = inbox.readline()
        if not line:
            return _ended(process, None, limits)
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
            return CellOutcome(suspended=message["call"])
        else:
            process.wait(timeout=30)
            outcome = CellOutcome.model_validate({k: v for k, v in message.items() if k != "type"})
            extra = _printed(process)
            if extra:
                outcome.stdout += extra
            outcome.stdout = _bounded(outcome.stdout)
            return outcome


def _ended(process: subprocess.Popen[bytes], _: Any, limits: CellLimits) -> CellOutcome:
    """The cell's process ended without reporting: a limit killed it, or the interpreter died."""
    code = process.wait(timeout=30)
    printed = _printed(process)
    if code == -signal.SIGXCPU or code == -signal.SIGKILL:
        reason = (
            f"TimeoutError: the cell used its {limits.timeout_seconds:g} s of CPU and was stopped"
        )
    elif code < 0:
        reason = f"the cell's process died of signal {signal.Signals(-code).name}"
    else:
        reason = f"the cell's process exited with status {code} before finishing"
    return CellOutcome(stdout=printed, error=reason)


def _printed(process: subprocess.Popen[bytes]) -> str:
    """What the process wrote to its own stdout/stderr (native code, the interpreter)."""
    if process.stdout is None or process.poll() is None:
        return ""
    return _bounded(process.stdout.read().decode("utf-8", "replace"))


def _bounded(text: str) -> str:
    if len(text) <= MAX_STDOUT_CHARS:
        return text
    return text[:MAX_STDOUT_CHARS] + f"\n… [{len(text) - MAX_STDOUT_CHARS} more characters]"


def _kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
