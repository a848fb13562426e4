"""keyed event chain: room for a key id in chain hashes, and a sealed chain head

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 00:00:00

A chain signed with a key (HMAC-SHA256) stores "<key id>:<mac>" per event, longer than a bare
SHA-256; the head gains a seal, a MAC over where the log ends, so that removing events at the
end and moving the head back needs the key too. Existing chains stay as they are (unkeyed).
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.alter_column(
            "chain_hash",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=64),
            type_=sqlmodel.sql.sqltypes.AutoString(length=96),
            existing_nullable=True,
        )
    with op.batch_alter_table("event_chain_head", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("seal", sqlmodel.sql.sqltypes.AutoString(), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("event_chain_head", schema=None) as batch_op:
        batch_op.drop_column("seal")
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.alter_column(
            "chain_hash",
            existing_type=sqlmodel.sql.sqltypes.AutoString(length=96),
            type_=sqlmodel.sql.sqltypes.AutoString(length=64),
            existing_nullable=True,
        )
