"""The process one REPL cell runs in (started by ``rlm/sandbox.py``; standard library and
cloudpickle only, run with ``python -I`` so nothing of the project is importable).

It restores the REPL's namespace from the snapshot the previous cell left, installs the guards
(resource limits, an audit hook that refuses network, process creation, native code and writes
outside the cell's directory), runs the cell with the REPL's globals, and reports what the cell
printed, its error, and the namespace it leaves. The globals that reach outside (``store``,
``apply_commit``) are calls to the host over a pipe; those whose answer comes from Temporal
(``llm_query``, ``rlm_worker`` and their batched forms) are answered from ``memo``, the results
the workflow already holds for this cell: the first call past ``memo`` suspends the cell, the
workflow makes the call durably, and runs the cell again with one more answer.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import io
import json
import os
import resource
import sys
import threading
import traceback
from typing import Any

import cloudpickle

REPL_NAMES = (
    "CallTooLarge",
    "ResultTooLarge",
    "context",
    "store",
    "llm_query",
    "llm_query_batched",
    "rlm_worker",
    "rlm_worker_batched",
    "apply_commit",
    "FINAL_VAR",
)


class CallTooLarge(Exception):
    """A call whose arguments would not fit through Temporal (the cell may catch it)."""


class ResultTooLarge(Exception):
    """Answers too large to hand back to the cell (the cell may catch it)."""


ERRORS = {"CallTooLarge": CallTooLarge, "ResultTooLarge": ResultTooLarge}
# An answer that is a failure: {"error": "one line"[, "error_type": one of ERRORS]}
ERROR_KEYS = {"error", "error_type"}


def call_refusal(kind: str, args: dict[str, Any], bounds: dict[str, Any]) -> str | None:
    """Why a call cannot be made, or None. Its arguments cross Temporal (the workflow makes
    the call): a worker's ``context`` goes to the store and is not counted. The sandbox's host
    checks the same, whatever the cell did to this copy."""
    prompts = args.get("prompts") or []
    if kind == "llm_query" and len(prompts) > bounds["call_prompts"]:
        return (
            f"CallTooLarge: llm_query_batched got {len(prompts):,} prompts; at most "
            f"{bounds['call_prompts']} per call. Send them in several calls"
        )
    if kind == "rlm_worker":
        tasks = args.get("tasks") or []
        args = {
            **args,
            "tasks": [{**t, "context": None} if isinstance(t, dict) else t for t in tasks],
        }
    size = len(json.dumps(args, default=str).encode("utf-8", "replace"))
    if size <= bounds["call_bytes"]:
        return None
    what = "llm_query's prompts" if kind == "llm_query" else "rlm_worker's prompts and cards"
    return (
        f"CallTooLarge: {what} are {size:,} bytes; the limit is {bounds['call_bytes']:,}. "
        "Send a slice or a summary, or split the work over several calls (a worker's "
        "`context` may be large: it goes to the store)"
    )


class Suspend(BaseException):
    """A call whose answer the workflow must get first (not an Exception: cells catch those)."""


class Refused(PermissionError):
    pass


class Host:
    """The pipe to the activity that started this process."""

    def __init__(self, rfd: int, wfd: int) -> None:
        self.inbox = os.fdopen(rfd, "r", encoding="utf-8")
        self.outbox = os.fdopen(wfd, "w", encoding="utf-8")

    def send(self, message: dict[str, Any]) -> None:
        self.outbox.write(json.dumps(message, default=str) + "\n")
        self.outbox.flush()

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        self.send({"type": "store", "method": method, "args": args, "kwargs": kwargs})
        reply = json.loads(self.inbox.readline())
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply["ok"]


class StoreProxy:
    """``store`` in the REPL: every call goes to the host, which owns the real store."""

    def __init__(self, host: Host, methods: list[str]) -> None:
        self._host = host
        self._methods = set(methods)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in self._methods:
            raise AttributeError(
                f"store has no {name!r} (it has {', '.join(sorted(self._methods))})"
            )
        return lambda *args, **kwargs: self._host.call(name, *args, **kwargs)

    def __dir__(self) -> list[str]:
        return sorted(self._methods)


class Guard:
    """The audit hook: what a cell may not do, refused before it happens. Python's audit hooks
    cannot be removed once added; native code (ctypes) that could bypass them is refused too."""

    BLOCKED = {
        "socket.__new__": "network access",
        "socket.connect": "network access",
        "socket.bind": "network access",
        "socket.getaddrinfo": "network access",
        "socket.gethostbyname": "network access",
        "socket.sendto": "network access",
        "subprocess.Popen": "starting processes",
        "os.system": "starting processes",
        "os.exec": "starting processes",
        "os.posix_spawn": "starting processes",
        "os.spawn": "starting processes",
        "os.fork": "starting processes",
        "os.forkpty": "starting processes",
        "os.kill": "signalling processes",
        "ctypes.dlopen": "native code",
        "ctypes.dlsym": "native code",
        "ctypes.cdata": "native code",
        "ctypes.call_function": "native code",
        "resource.setrlimit": "changing its limits",
        "builtins.input": "reading input",
    }
    PATH_EVENTS = {
        "os.remove": 0,
        "os.rmdir": 0,
        "os.mkdir": 0,
        "os.rename": 1,  # and os.replace: the destination too
        "os.chmod": 0,
        "os.chown": 0,
        "os.link": 1,
        "os.symlink": 1,
        "os.truncate": 0,
        "os.utime": 0,
        "shutil.rmtree": 0,
        "shutil.copyfile": 1,
        "shutil.move": 1,
    }
    WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def __init__(self, workdir: str, readable: list[str]) -> None:
        self.workdir = os.path.realpath(workdir)
        self.readable = [os.path.realpath(p) for p in readable] + [self.workdir]
        self.local = threading.local()  # per thread: threads cannot race one flag past it

    def _inside(self, path: Any, roots: list[str]) -> bool:
        if isinstance(path, int):
            return True  # an open file descriptor: its path was checked when it was opened
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        # against the current directory, as the call itself resolves it (after a chdir too)
        full = os.path.realpath(str(path))
        return any(full == root or full.startswith(root + os.sep) for root in roots)

    def __call__(self, event: str, args: tuple[Any, ...]) -> None:
        if getattr(self.local, "busy", False):
            return
        self.local.busy = True
        try:
            self._check(event, args)
        finally:
            self.local.busy = False

    def _check(self, event: str, args: tuple[Any, ...]) -> None:
        if event in self.BLOCKED:
            raise Refused(f"the sandbox refuses {self.BLOCKED[event]} ({event})")
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & self.WRITE_FLAGS
            )
            if writes and not self._inside(path, [self.workdir]):
                raise Refused(f"the sandbox refuses writing outside the cell's directory ({path})")
            if not writes and not self._inside(path, self.readable):
                raise Refused(f"the sandbox refuses reading outside its roots ({path})")
        elif event == "sqlite3.connect":  # opens files with no "open" event of its own
            database = args[0] if args else ""
            if str(database) != ":memory:" and not self._inside(database, [self.workdir]):
                raise Refused(f"the sandbox refuses databases outside its directory ({database})")
        elif event in self.PATH_EVENTS:
            paths = [a for a in args[: self.PATH_EVENTS[event] + 1] if isinstance(a, str | bytes)]
            for path in paths:
                if not self._inside(path, [self.workdir]):
                    raise Refused(
                        f"the sandbox refuses changing files outside its directory ({path})"
                    )


def snapshot(namespace: dict[str, Any]) -> tuple[bytes, list[str]]:
    """The namespace to restore before the next cell: values cloudpickle can keep, modules by
    name; what cannot be kept is named, so the model knows to rebuild it."""
    kept: dict[str, Any] = {}
    modules: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in namespace.items():
        if name.startswith("__") or name in REPL_NAMES:
            continue
        if type(value).__name__ == "module":
            modules[name] = value.__name__
            continue
        try:
            cloudpickle.dumps(value)
        except Exception:  # whatever cannot be kept is dropped, by name
            dropped.append(name)
            continue
        kept[name] = value
    return cloudpickle.dumps({"values": kept, "modules": modules}), dropped


def restore(data: bytes | None) -> dict[str, Any]:
    if not data:
        return {}
    saved = cloudpickle.loads(data)
    namespace = dict(saved["values"])
    for name, module in saved["modules"].items():
        with contextlib.suppress(Exception):
            namespace[name] = __import__(module, fromlist=["_"])
    return namespace


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [{len(text) - limit} more characters]"


def _sandbox_hint(exc: BaseException, limits: dict[str, Any]) -> str:
    """Which of the sandbox's bounds an error came from, so the model knows what it ran into."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code == errno.EROFS:
        return " (the sandbox: only the cell's directory is writable)"
    if code in (errno.ENOSPC, errno.EDQUOT):
        return (
            f" (the sandbox: the cell's directory holds {limits['directory_mb']} MB, "
            "all its files together)"
        )
    if code == errno.EFBIG:
        return f" (the sandbox: a file may hold {limits['file_bytes'] // 2**20} MB)"
    most = limits["max_processes"]
    if code == errno.EAGAIN and limits["processes"] is not None:
        return f" (the sandbox: a cell runs at most {most} processes and threads)"
    if "can't start new thread" in str(exc):  # the thread cap, or its stack past the memory
        return (
            f" (the sandbox: a cell runs at most {most} processes and threads, within "
            f"{limits['memory_bytes'] // 2**20} MB)"
        )
    return ""


def _guard(limits: dict[str, Any], workdir: str) -> None:
    """Bound the process (memory, CPU, file size, processes) and install the audit hook; from
    here on the process may read only the interpreter's files and write only ``workdir``."""
    memory = limits["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    cpu = limits["cpu_seconds"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    size = limits["file_bytes"]
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    if limits["processes"] is not None:  # counted in the sandbox's own user namespace
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"], limits["processes"]))
    os.chdir(workdir)
    readable = [sys.prefix, sys.base_prefix, sys.exec_prefix, "/dev/null", "/dev/urandom"]
    readable += [p for p in sys.path if p]
    sys.addaudithook(Guard(workdir, readable))


def _cell_error(exc: BaseException, limits: dict[str, Any]) -> str:
    """The cell's error in one line for the model: its type, the cell's line it came from
    (frames of this file are not the model's), and which sandbox bound it met, if one."""
    frames = traceback.extract_tb(exc.__traceback__)
    cell_frames = [f for f in frames if f.filename == "<cell>"]
    where = f" (line {cell_frames[-1].lineno})" if cell_frames else ""
    return f"{type(exc).__name__}{where}: {exc}{_sandbox_hint(exc, limits)}"


def _kept_namespace(namespace: dict[str, Any], limit: int) -> tuple[bytes, list[str]]:
    """(snapshot, dropped names) of the namespace the next cell starts from; one too large to
    make or over ``limit`` bytes is dropped whole, and the note says so."""
    try:
        data, dropped = snapshot(namespace)
    except MemoryError:
        data, dropped = b"", ["(the namespace: too large to keep)"]
    if len(data) > limit:
        data, dropped = b"", [f"(the namespace: {len(data) // 2**20} MB, over the limit)"]
    return data, dropped


def _final_value(final: dict[str, Any], limit: int) -> tuple[Any, bool, str | None]:
    """(value, set, error): what the cell gave FINAL_VAR; one over ``limit`` bytes of JSON is
    not sent back, and the error (which replaces the cell's own) tells the model what to do."""
    value, final_set = final.get("value"), "value" in final
    if final_set and len(json.dumps(value, default=str)) > limit:
        too_large = (
            f"ResultTooLarge: FINAL_VAR's value is over {limit // 1024} KB. "
            "Return a summary, or store.create the data and return its id"
        )
        return None, False, too_large
    return value, final_set, None


def main() -> None:
    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    host = Host(rfd, wfd)
    job = json.loads(host.inbox.readline())
    limits = job["limits"]
    _guard(limits, job["workdir"])

    out = io.StringIO()
    bounds = job["bounds"]
    memo: list[Any] = job["memo"]
    calls = 0
    final: dict[str, Any] = {}

    def external(kind: str, **args: Any) -> Any:
        nonlocal calls
        # refused before it is counted: the answers in ``memo`` are the calls that were made
        refused = call_refusal(kind, args, bounds)
        if refused is not None:
            raise CallTooLarge(refused.removeprefix("CallTooLarge: "))
        calls += 1
        if calls <= len(memo):
            answer = memo[calls - 1]
            if isinstance(answer, dict) and "error" in answer and set(answer) <= ERROR_KEYS:
                raise ERRORS.get(answer.get("error_type", ""), RuntimeError)(answer["error"])
            return answer
        host.send({"type": "suspend", "call": {"kind": kind, "args": args}})
        raise Suspend

    def llm_query(prompt: str) -> str:
        return external("llm_query", prompts=[str(prompt)])[0]

    def llm_query_batched(prompts: list[str]) -> list[str]:
        return external("llm_query", prompts=[str(p) for p in prompts])

    def rlm_worker(prompt: str, store_cards: Any = None, context: Any = None) -> dict[str, Any]:
        task = {"prompt": str(prompt), "store_cards": store_cards, "context": context}
        return external("rlm_worker", tasks=[task], max_parallel=1)[0]

    def rlm_worker_batched(tasks: list[Any], max_parallel: int = 8) -> list[dict[str, Any]]:
        tasks = [t if isinstance(t, dict) else {"prompt": str(t)} for t in tasks]
        return external("rlm_worker", tasks=tasks, max_parallel=int(max_parallel))

    def apply_commit(commit: Any, batch_prefix: str = "", batch_parent: str | None = None) -> Any:
        return host.call(
            "apply_commit", commit, batch_prefix=batch_prefix, batch_parent=batch_parent
        )

    def FINAL_VAR(value: Any) -> Any:
        json.dumps(value, default=str)  # what cannot be sent back fails here, in the cell
        final["value"] = value
        return value

    namespace = restore(base64.b64decode(job["snapshot"]) if job["snapshot"] else None)
    namespace.update(
        __name__="__main__",
        __builtins__=__builtins__,
        context=job["context"],
        store=StoreProxy(host, job["store_methods"]),
        llm_query=llm_query,
        llm_query_batched=llm_query_batched,
        apply_commit=apply_commit,
        FINAL_VAR=FINAL_VAR,
        CallTooLarge=CallTooLarge,
        ResultTooLarge=ResultTooLarge,
    )
    if job["can_recurse"]:
        namespace.update(rlm_worker=rlm_worker, rlm_worker_batched=rlm_worker_batched)
    error = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(compile(job["code"], "<cell>", "exec"), namespace)  # the REPL, guarded above
    except Suspend:
        return
    except BaseException as exc:  # the cell's error goes back to the model
        error = _cell_error(exc, limits)
    data, dropped = _kept_namespace(namespace, bounds["snapshot_bytes"])
    value, final_set, too_large = _final_value(final, bounds["final_bytes"])
    error = too_large or error
    printed = out.getvalue()
    host.send(
        {
            "type": "done",
            "stdout": _bounded(printed, bounds["stdout_chars"]),
            "error": _bounded(error, bounds["error_chars"]) if error else None,
            "final": value,
            "final_set": final_set,
            "snapshot": base64.b64encode(data).decode("ascii"),
            "dropped": dropped,
        }
    )
    host.inbox.read()  # until the host is done with this cell (it may copy its files first)


if __name__ == "__main__":
    main()
