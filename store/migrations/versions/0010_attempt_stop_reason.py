"""attempts record why the model stopped

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 17:00:00

An answer cut off at the token limit is not the model ignoring its instructions: the trainer,
``state`` and the review card tell the two apart by the attempt's stop reason ("max_tokens").
Events written before carry none, and their attempts keep NULL.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("stop_reason", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_column("stop_reason")
