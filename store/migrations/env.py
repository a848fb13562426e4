"""Alembic environment: the store's SQLModel metadata, any SQLAlchemy URL."""

from __future__ import annotations

import os

from alembic import context
from sqlmodel import SQLModel

from store import tables  # noqa: F401  (registers every table)
from store.backends.database import create_store_engine, database_url_from_env

config = context.config
target_metadata = SQLModel.metadata
EXCLUDE = tuple(filter(None, os.environ.get("TRAINING_CAMP_MIGRATION_EXCLUDE", "").split(",")))


def include_object(obj, name, type_, reflected, compare_to):  # type: ignore[no-untyped-def]
    # Used only while generating revisions, to split history into steps.
    return not (type_ == "table" and EXCLUDE and name.startswith(EXCLUDE))


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or database_url_from_env()
    connectable = config.attributes.get("connection") or create_store_engine(url)
    if hasattr(connectable, "connect"):
        with connectable.connect() as connection:
            _run(connection)
    else:
        _run(connectable)


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
