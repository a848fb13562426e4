"""Python commands as processes of their own, forked from one interpreter that imported the app
once: a new interpreter spends seconds of CPU importing it for each command a test runs.

The zygote (``python -m tests.forked SOCKET``, one per test process, started on first use)
imports what the commands load, except the modules that read the environment as they are
imported (those that make a console); for each request it forks a process that takes the
request's argv, environment, working directory and stdin/stdout/stderr, runs the command as
``python ARGV`` runs it (a script or ``-m module``), and exits as the interpreter would: the
exit code of SystemExit, 1 after an uncaught exception's traceback. The process is a real one
(its own pid, signals, exit status), only not a fresh interpreter.
"""

from __future__ import annotations

import array
import asyncio
import atexit
import contextlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# What the commands import, or most of it; not starter, services.training_data, review.serve,
# review.inbox_table, services.instructions or demo.*: each makes a console as it is imported,
# which reads COLUMNS and the like from the environment then.
PRELOAD = (
    "client",
    "domain.spec",
    "review.views",
    "services.reading_prompt",
    "store",
    "worker",
    "workflows.lineage",
)
_FORBIDDEN = (
    "starter",
    "services.training_data",
    "services.instructions",
    "review.serve",
    "review.inbox_table",
    "demo.watch",
    "demo.session",
)


# --- the zygote ------------------------------------------------------------------------------


def _receive(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return json.loads(data), list(fds)


def _run(argv: list[str]) -> int:
    """``python *argv`` in this process; its exit code."""
    try:
        if argv[0] == "-m":
            sys.argv = ["-m", *argv[2:]]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path.insert(0, str(Path(argv[0]).resolve().parent))
            runpy.run_path(argv[0], run_name="__main__")
        code = 0
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            code = exit.code or 0
        else:  # sys.exit("message"): printed, exit code 1
            print(exit.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    # as the interpreter ends: its threads joined, then the exit functions
    with contextlib.suppress(BaseException):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    return code


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """In the forked process: become the command, and end with its exit code."""
    code = 70
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        code = _run(request["argv"])
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def serve(path: str) -> None:
    for module in PRELOAD:
        __import__(module)
    assert not [m for m in _FORBIDDEN if m in sys.modules], "a console made at import"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # nobody reads the pipe "ready" went through
    os.close(null)
    waiting: dict[int, socket.socket] = {}  # each command's process: the requester's socket
    requests = selectors.DefaultSelector()
    requests.register(listener, selectors.EVENT_READ)
    while True:
        # a request, or a command's end: looked for every 20 ms while commands run
        with contextlib.suppress(InterruptedError):
            if requests.select(timeout=0.02 if waiting else 1):
                conn, _ = listener.accept()
                request, fds = _receive(conn)
                pid = os.fork()
                if pid == 0:
                    # none of the zygote's sockets: they are its requesters', not the command's
                    for held in (listener, conn, *waiting.values()):
                        held.close()
                    requests.close()
                    _child(request, fds)
                for fd in fds:
                    os.close(fd)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                waiting[pid] = conn
        while waiting:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = waiting.pop(pid)
            with contextlib.suppress(OSError):
                code = os.waitstatus_to_exitcode(status)
                conn.sendall(json.dumps({"code": code}).encode() + b"\n")
            conn.close()


# --- in the tests ----------------------------------------------------------------------------


class _Zygote:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="tc-test-zygote-")
        self.path = os.path.join(self.folder, "socket")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.forked", self.path],
            cwd=ROOT,
            # as little of this process's environment as the commands' own: each gets its own
            env={k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline() != b"ready\n":
            raise RuntimeError("the zygote did not start")
        atexit.register(self.stop)

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.folder)


_zygote: _Zygote | None = None
_starting = threading.Lock()


def _the_zygote() -> _Zygote:
    global _zygote
    with _starting:
        if _zygote is None or _zygote.process.poll() is not None:
            _zygote = _Zygote()
        return _zygote


class Forked:
    """A command's process (as ``subprocess.Popen`` has it): pid, signals, exit code."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path, fds: list[int]) -> None:
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(_the_zygote().path)
        request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode()
        self._conn.sendmsg(
            [request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        )
        self._reply = self._conn.makefile("rb")
        self.pid: int = json.loads(self._reply.readline())["pid"]
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._conn.settimeout(timeout)
            try:
                said = self._reply.readline()
            except TimeoutError:
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0) from None
            self.returncode = json.loads(said)["code"]
            self._reply.close()
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class AsyncForked(Forked):
    """The same, awaited as ``asyncio.subprocess.Process`` is; ``stdout``: its output, when
    asked for."""

    stdout: asyncio.StreamReader | None = None

    async def wait(self) -> int:  # type: ignore[override]
        return await asyncio.to_thread(super().wait)


def _null() -> int:
    return os.open(os.devnull, os.O_RDWR)


async def spawn(
    argv: list[str],
    env: dict[str, str],
    cwd: Path = ROOT,
    stdout: bool = False,
    stderr: bool = False,
) -> AsyncForked:
    """``python *argv`` in a forked process, its stdio on /dev/null, but for its output read
    through ``.stdout`` (``stdout``) and its errors on this process's stderr (``stderr``)."""
    out_read, out_write = os.pipe() if stdout else (None, _null())
    fds = [_null(), out_write, os.dup(2) if stderr else _null()]
    try:
        # in a thread: the first call waits for the zygote to import the app
        proc = await asyncio.to_thread(AsyncForked, argv, env, cwd, fds)
    finally:
        for fd in fds:
            os.close(fd)
    if out_read is not None:
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(out_read, "rb", 0)
        )
        proc.stdout = reader
    return proc


def run(
    argv: list[str],
    env: dict[str, str],
    cwd: Path = ROOT,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([sys.executable, *argv], capture_output=True, text=True, …)``, the
    process forked; stdin holds ``input`` (else it is empty)."""
    stdin_read, stdin_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        proc = Forked(argv, env, cwd, [stdin_read, out_write, err_write])
    finally:
        for fd in (stdin_read, out_write, err_write):
            os.close(fd)
    deadline = time.monotonic() + timeout
    with contextlib.suppress(BrokenPipeError), os.fdopen(stdin_write, "wb") as stdin:
        stdin.write((input or "").encode())
    read = {out_read: b"", err_read: b""}
    with selectors.DefaultSelector() as selector:
        for fd in read:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                proc.wait()
                raise subprocess.TimeoutExpired(argv, timeout)
            for key, _ in selector.select(timeout=left):
                chunk = os.read(key.fd, 1 << 16)
                if chunk:
                    read[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
                    os.close(key.fd)
    code = proc.wait(timeout=max(deadline - time.monotonic(), 1))
    stdout, stderr = (read[fd].decode("utf-8", "replace") for fd in (out_read, err_read))
    return subprocess.CompletedProcess([sys.executable, *argv], code, stdout, stderr)


if __name__ == "__main__":
    serve(sys.argv[1])
