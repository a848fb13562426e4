"""Running a command-line app (Typer) to its end, as the console scripts do."""

from __future__ import annotations

import os
import re
import sys
from typing import NoReturn

import lazy_loader as lazy
import typer
from temporalio.service import RPCError, RPCStatusCode

from services.terminal import console, shown

# the credential detectors load only when an error is said (a command pays for none otherwise)
redaction = lazy.load("domain.redaction", suppress_warning=True)

_UNREACHABLE = (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def operator_error(exc: BaseException) -> str | None:
    """One line for an error the operator can fix (Temporal or the store unreachable, a store
    URL that does not parse), or None for a bug, whose traceback is worth having."""
    # imported on the way out: a command that never opens the store does not load SQLAlchemy
    from sqlalchemy.exc import ArgumentError, InterfaceError, OperationalError

    if isinstance(exc, RuntimeError) and str(exc).startswith("Failed client connect"):
        address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
        # the SDK's reason is a Rust error's debug form; its OS message says it in words
        said = re.search(r'message: "([^"]+)"', str(exc))
        reason = said.group(1) if said else _first_line(str(exc))
        return (
            f"cannot reach Temporal at {address} ({reason}); is the server running, and "
            "TEMPORAL_ADDRESS right?"
        )
    if isinstance(exc, RPCError):
        if exc.status in _UNREACHABLE:
            return f"Temporal is unreachable: {_first_line(exc.message)}"
        return f"Temporal refused the request: {_first_line(exc.message)}"
    if isinstance(exc, OperationalError | InterfaceError):
        reason = _first_line(str(exc.orig if exc.orig is not None else exc))
        return (
            f"cannot use the store: {reason} (is the database up, and --database-url or "
            "TRAINING_CAMP_DATABASE_URL right?)"
        )
    if isinstance(exc, ArgumentError):
        return f"the store's URL is not valid: {_first_line(str(exc))}"
    return None


def run(app: typer.Typer) -> NoReturn:
    """Run ``app`` and exit with its status, skipping the interpreter's own exit: a process
    holding Temporal clients can abort there (temporalio/sdk-python#300). Temporal or the store
    out of reach is one line on stderr and exit code 1, not a traceback."""
    code = 0
    try:
        app()
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    except Exception as exc:
        line = operator_error(exc)
        if line is None:
            raise
        # the reason may quote a URL or a server's answer: credentials masked (the detectors
        # loaded on the way out, as the store's errors are: a command pays for neither)
        line = redaction.redact(line, [os.environ.get("ANTHROPIC_API_KEY")])
        console(stderr=True).print(
            f"[red]error:[/red] {shown(line)}", highlight=False, soft_wrap=True
        )
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
