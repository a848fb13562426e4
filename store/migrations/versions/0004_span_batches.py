"""span batches: span texts inline, three event indexes no read uses dropped

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 05:40:00

Span events now carry a batch of spans with their texts (schema v2 of attempt.span_recorded), and
the span projection holds the texts. Rows written before this revision get their texts from the
payload blobs their hashes point at; the blobs themselves stay (the v1 events still refer to them).
The event indexes on timestamp, artifact_id and attempt_id served no query and cost a page write
per append.
"""

import hashlib
import json
from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1000
# The tables as this revision knows them (frozen here, whatever the models say later).
spans = sa.table(
    "execution_spans",
    sa.column("id", sa.String),
    sa.column("input_hash", sa.String),
    sa.column("output_hash", sa.String),
    sa.column("input", sa.String),
    sa.column("output", sa.String),
)
blobs = sa.table(
    "payload_blobs",
    sa.column("hash", sa.String),
    sa.column("content", sa.String),
    sa.column("size", sa.Integer),
    sa.column("created_at", sa.BigInteger),
)


def upgrade() -> None:
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.drop_index("ix_training_events_artifact_id")
        batch_op.drop_index("ix_training_events_attempt_id")
        batch_op.drop_index("ix_training_events_timestamp")
    with op.batch_alter_table("execution_spans", schema=None) as batch_op:
        batch_op.add_column(sa.Column("input", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
        batch_op.add_column(sa.Column("output", sqlmodel.sql.sqltypes.AutoString(), nullable=True))
    _copy_texts()
    with op.batch_alter_table("execution_spans", schema=None) as batch_op:
        batch_op.drop_column("input_hash")
        batch_op.drop_column("output_hash")


def _copy_texts() -> None:
    conn = op.get_bind()
    after = ""
    while True:
        rows = conn.execute(
            sa.select(spans.c.id, spans.c.input_hash, spans.c.output_hash)
            .where(spans.c.id > after)
            .order_by(spans.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        hashes = {h for _, i, o in rows for h in (i, o) if h}
        texts = {
            h: json.loads(content)
            for h, content in conn.execute(
                sa.select(blobs.c.hash, blobs.c.content).where(blobs.c.hash.in_(hashes))
            )
        }
        updates = [
            {"_id": span_id, "_in": texts.get(i or ""), "_out": texts.get(o or "")}
            for span_id, i, o in rows
            if i or o
        ]
        if updates:
            conn.execute(
                spans.update()
                .where(spans.c.id == sa.bindparam("_id"))
                .values(input=sa.bindparam("_in"), output=sa.bindparam("_out")),
                updates,
            )
        after = rows[-1][0]


def downgrade() -> None:
    with op.batch_alter_table("training_events", schema=None) as batch_op:
        batch_op.create_index("ix_training_events_timestamp", ["timestamp"], unique=False)
        batch_op.create_index("ix_training_events_attempt_id", ["attempt_id"], unique=False)
        batch_op.create_index("ix_training_events_artifact_id", ["artifact_id"], unique=False)
    with op.batch_alter_table("execution_spans", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("input_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
        batch_op.add_column(
            sa.Column("output_hash", sqlmodel.sql.sqltypes.AutoString(), nullable=True)
        )
    _store_texts_as_blobs()
    with op.batch_alter_table("execution_spans", schema=None) as batch_op:
        batch_op.drop_column("input")
        batch_op.drop_column("output")


def _store_texts_as_blobs() -> None:
    """The texts go back behind content hashes (canonical JSON, as the payload store writes)."""
    conn = op.get_bind()

    def address(text: str | None) -> str | None:
        if text is None:
            return None
        content = json.dumps(text, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        if conn.execute(sa.select(blobs.c.hash).where(blobs.c.hash == digest)).first() is None:
            conn.execute(
                blobs.insert().values(
                    hash=digest, content=content, size=len(content.encode()), created_at=0
                )
            )
        return digest

    for span_id, text_in, text_out in conn.execute(
        sa.select(spans.c.id, spans.c.input, spans.c.output)
    ).all():
        conn.execute(
            spans.update()
            .where(spans.c.id == span_id)
            .values(input_hash=address(text_in), output_hash=address(text_out))
        )
