"""Transient or permanent: how an activity's failure is retried.

Store steps retry without limit, because a database that is briefly unreachable must not lose a
record. An error that no retry can fix — data the database refuses, a missing table, a broken
constraint — would then retry forever, silently. This interceptor makes such errors
non-retryable ``PermanentStoreError``s, named and quoted briefly, so the workflow can surface
them (``last_error`` in ``state``) instead of waiting on them. Connection problems, timeouts and
lock waits stay transient and are retried.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
from sqlalchemy import exc as sa
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from domain.redaction import redact

MESSAGE_CHARS = 500
# Errors a retry can fix: the database or the network will come back
_TRANSIENT = (
    sa.OperationalError,
    sa.InterfaceError,
    sa.DisconnectionError,
    sa.TimeoutError,
    psycopg.OperationalError,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    ConnectionError,
    TimeoutError,
)
# Errors a retry repeats: what was sent or how the store is laid out is wrong
_PERMANENT = (
    sa.DataError,
    sa.IntegrityError,
    sa.ProgrammingError,
    sa.NotSupportedError,
    psycopg.DataError,
    psycopg.IntegrityError,
    psycopg.ProgrammingError,
    sqlite3.DataError,
    sqlite3.IntegrityError,
    sqlite3.ProgrammingError,
    UnicodeEncodeError,
)


def _kind(error: BaseException) -> str | None:
    """'transient', 'permanent' or None (unknown), checked through the exception's causes."""
    seen: BaseException | None = error
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, _TRANSIENT):
            return "transient"
        if isinstance(seen, _PERMANENT):
            return "permanent"
        seen = seen.__cause__ or seen.__context__
    return None


def is_permanent(error: BaseException) -> bool:
    """True when retrying ``error`` cannot succeed."""
    return _kind(error) == "permanent"


def is_transient(error: BaseException) -> bool:
    """True when ``error`` is the store or the network being away for a while."""
    return _kind(error) == "transient"


def failure_reason(error: BaseException) -> str:
    """What a step that failed for good says of it in ``state`` and the store: one line,
    bounded, with any credential it quotes masked."""
    return one_line(f"{type(error).__name__}: {error}")


def one_line(text: str) -> str:
    """An error's text as people (and models) are told it: one line, bounded, credentials
    masked."""
    return redact(" ".join(text.split()))[:MESSAGE_CHARS]


def _describe(error: BaseException) -> str:
    original = getattr(error, "orig", None) or error
    text = " ".join(str(original).split())
    return f"{type(original).__name__}: {text[:MESSAGE_CHARS]}"


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await super().execute_activity(input)
        except ApplicationError:
            raise
        except Exception as error:
            if not is_permanent(error):
                raise
            name = activity.info().activity_type
            raise ApplicationError(
                f"{name}: the store cannot take this ({_describe(error)})",
                type="PermanentStoreError",
                non_retryable=True,
            ) from None


class PermanentErrorInterceptor(Interceptor):
    """Installed on every worker (see ``worker.build_worker``)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)
