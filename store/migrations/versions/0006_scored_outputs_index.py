"""scored outputs indexed by session and cycle, for set-based pairing

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 14:00:00

The materializer pairs each new score with the outputs of its session and cycle scored before it
in one SQL statement per window of the log. With one index on the session and another on the
cycle, SQLite's planner walked every output of a cycle across all sessions for each score (a
million-event rebuild: minutes). One index on both serves pairing and a lock's look-up by session.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("mv_scored_artifacts", schema=None) as batch_op:
        batch_op.drop_index("ix_mv_scored_artifacts_cycle")
        batch_op.drop_index("ix_mv_scored_artifacts_session_id")
        batch_op.create_index(
            "ix_mv_scored_artifacts_session_cycle", ["session_id", "cycle"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("mv_scored_artifacts", schema=None) as batch_op:
        batch_op.drop_index("ix_mv_scored_artifacts_session_cycle")
        batch_op.create_index("ix_mv_scored_artifacts_session_id", ["session_id"], unique=False)
        batch_op.create_index("ix_mv_scored_artifacts_cycle", ["cycle"], unique=False)
