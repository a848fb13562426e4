"""evaluations indexed by session and cycle, for a score's comparison check

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24 04:00:00

Every score asks, inside its write transaction, whether all of its session's lineages have scored
the cycle. Through the index on the session alone that meant reading every evaluation of the
session (lineages x cycles) to keep those of one cycle, so scores got slower as a session aged,
holding SQLite's write lock. One index on both columns finds the cycle's rows and serves the
look-ups by session alone, so it replaces the session index.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index("ix_evaluations_session_id")
        batch_op.create_index("ix_evaluations_session_cycle", ["session_id", "cycle"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index("ix_evaluations_session_cycle")
        batch_op.create_index("ix_evaluations_session_id", ["session_id"], unique=False)
