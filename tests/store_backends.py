"""Database backends for the store's behavioural suite: SQLite and a real PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

# Trust auth on 127.0.0.1:5432 on development and CI machines.
POSTGRES_ADMIN_URL = os.environ.get(
    "TRAINING_CAMP_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    name = f"tc_test_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True)
    except psycopg.OperationalError as exc:
        raise RuntimeError(
            f"PostgreSQL is required for the store suite and is not reachable at "
            f"{POSTGRES_ADMIN_URL} ({exc}); set TRAINING_CAMP_TEST_POSTGRES_URL"
        ) from exc
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
        try:
            yield f"{base}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
    else:
        with postgres_database() as url:
            yield url


class DatabaseOutage:
    """A PostgreSQL database made unreachable and brought back: new connections are refused
    and open ones are cut, as when the server goes away. ``with`` makes sure it comes back."""

    def __init__(self, url: str) -> None:
        self.name = url.rsplit("/", 1)[1]
        self._admin = psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True)

    def begin(self) -> None:
        self._admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self._admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
            (self.name,),
        )

    def end(self) -> None:
        self._admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def __enter__(self) -> DatabaseOutage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()
        self._admin.close()
