"""Running a command-line app (Typer) to its end, as the console scripts do."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import typer


def run(app: typer.Typer) -> NoReturn:
    """Run ``app`` and exit with its status, skipping the interpreter's own exit: a process
    holding Temporal clients can abort there (temporalio/sdk-python#300)."""
    code = 0
    try:
        app()
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
