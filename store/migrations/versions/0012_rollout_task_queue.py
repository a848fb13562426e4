"""dataset tasks wait in the store

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 04:00:00

``queue_task`` writes a dataset task (its sample a payload blob) to ``rollout_tasks`` in one
transaction; Temporal carries its id. The dispatcher takes waiting tasks (``batch_id`` NULL)
in queue order, and the cap on waiting tasks counts a server's pending and running rollouts
(``ix_rollouts_session_status``). Tasks queued before this revision travelled inline in their
batch workflows and need no row.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rollout_tasks",
        sa.Column("position", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("rollout_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("server_id", sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("sample_hash", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("sample_bytes", sa.Integer(), nullable=False),
        sa.Column(
            "resources_workflow_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False
        ),
        sa.Column("resources_version", sa.Integer(), nullable=False),
        sa.Column(
            "client_task_queue", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False
        ),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("batch_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("position"),
        sa.UniqueConstraint("rollout_id"),
    )
    with op.batch_alter_table("rollout_tasks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rollout_tasks_batch_id"), ["batch_id"], unique=False)
        batch_op.create_index(
            "ix_rollout_tasks_waiting", ["server_id", "batch_id", "position"], unique=False
        )
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.create_index("ix_rollouts_session_status", ["session_id", "status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("rollouts", schema=None) as batch_op:
        batch_op.drop_index("ix_rollouts_session_status")
    with op.batch_alter_table("rollout_tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_rollout_tasks_waiting")
        batch_op.drop_index(batch_op.f("ix_rollout_tasks_batch_id"))
    op.drop_table("rollout_tasks")
