"""span rows keyed by (attempt, span id): one B-tree instead of three

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 16:45:00

Spans are only ever read by attempt. Keyed by their id alone, each span row wrote three B-trees
(the table, its key and an index on the attempt); keyed by (attempt_id, id), the key serves the
reads and the rows write two, one WAL page less for a span committed on its own. Span ids now
need to be unique within their attempt only: a client that numbers its spans per attempt keeps
them all. (Downgrading fails if two attempts hold the same span id.)
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _spans(key: list[str]) -> sa.Table:
    """The span table as this revision knows it, keyed by ``key`` (SQLite rebuilds the table
    from this; frozen here, whatever the models say later)."""
    text = sa.String
    return sa.Table(
        "execution_spans",
        sa.MetaData(),
        sa.Column("id", sa.String(220), nullable=False),
        sa.Column("attempt_id", sa.String(200), nullable=False),
        sa.Column("parent_span_id", text),
        sa.Column("sequence", sa.Integer, nullable=False),
        sa.Column("type", text, nullable=False),
        sa.Column("name", text),
        sa.Column("model_id", text),
        sa.Column("prompt_tokens", sa.Integer),
        sa.Column("completion_tokens", sa.Integer),
        sa.Column("tool_name", text),
        sa.Column("tool_args", text),
        sa.Column("tool_result", text),
        sa.Column("tool_error", text),
        sa.Column("duration_ms", sa.Integer),
        sa.Column("estimated_cost", sa.Float),
        sa.Column("started_at", sa.BigInteger),
        sa.Column("trace_id", text),
        sa.Column("otel_span_id", text),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("input", text),
        sa.Column("output", text),
        sa.PrimaryKeyConstraint(*key),
    )


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_execution_spans_attempt_id", table_name="execution_spans")
        op.drop_constraint("execution_spans_pkey", "execution_spans", type_="primary")
        op.create_primary_key("execution_spans_pkey", "execution_spans", ["attempt_id", "id"])
        return
    # SQLite cannot change a key in place: the table is rebuilt with the new one, rows copied.
    with op.batch_alter_table(
        "execution_spans", copy_from=_spans(["attempt_id", "id"]), recreate="always"
    ):
        pass
    op.drop_index("ix_execution_spans_attempt_id", if_exists=True)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("execution_spans_pkey", "execution_spans", type_="primary")
        op.create_primary_key("execution_spans_pkey", "execution_spans", ["id"])
        op.create_index("ix_execution_spans_attempt_id", "execution_spans", ["attempt_id"])
        return
    with op.batch_alter_table("execution_spans", copy_from=_spans(["id"]), recreate="always"):
        pass
    op.create_index("ix_execution_spans_attempt_id", "execution_spans", ["attempt_id"])
