"""labelled examples from corrected readings

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 10:00:00

A rater may correct how the trainer read a comment (``reading.corrected``); each correction is a
labelled example (comment → wants) the reader consults before its cue tables. A projection like
any other: a store upgraded from 0010 has no such events, so the table starts empty.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reading_corrections",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("session_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("lineage_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("evaluation_id", sqlmodel.sql.sqltypes.AutoString(length=220), nullable=False),
        sa.Column("comment", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("read_as", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("corrected", sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column("rater", sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column("cycle", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reading_corrections", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_reading_corrections_created_at"), ["created_at"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_reading_corrections_lineage_id"), ["lineage_id"], unique=False
        )
        batch_op.create_index(
            "ix_reading_corrections_session_created", ["session_id", "created_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("reading_corrections", schema=None) as batch_op:
        batch_op.drop_index("ix_reading_corrections_session_created")
        batch_op.drop_index(batch_op.f("ix_reading_corrections_lineage_id"))
        batch_op.drop_index(batch_op.f("ix_reading_corrections_created_at"))
    op.drop_table("reading_corrections")
