"""the event log's session index dropped: no read uses it, and every append wrote it

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 14:10:00

Reads of the log go by position, by type within a window of positions, or by lineage; sessions
are found through the projections. The index on ``training_events.session_id`` was one more
B-tree page written per append (a span streamed on its own commits about ten).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.drop_index("ix_training_events_session_id")


def downgrade() -> None:
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.create_index("ix_training_events_session_id", ["session_id"], unique=False)
